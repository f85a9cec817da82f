package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// SpecVersion is the plugin/v1 spec version a Provider reports.
const SpecVersion = "1.0"

// Provider answers the PluginService calls whose answers follow from
// the manifest and the port files — Handshake, GetManifest,
// GetDescriptors, Health and Shutdown — so that a provider writes Invoke
// only: embed it, by value, in the type that implements Invoke.
type Provider struct {
	pluginv1.UnimplementedPluginServiceServer
	Runtime  *Runtime
	Manifest *pluginv1.Manifest
	// Ports are the generated port files the provider implements
	// (their File_… variables); GetDescriptors answers with them and
	// everything they import.
	Ports []protoreflect.FileDescriptor
}

// Handshake answers with the version Serve negotiated.
func (p *Provider) Handshake(context.Context, *pluginv1.HandshakeRequest) (*pluginv1.HandshakeResponse, error) {
	return &pluginv1.HandshakeResponse{ProtocolVersion: p.Runtime.Version, SpecVersion: SpecVersion}, nil
}

// GetManifest answers with Manifest: the host requires it to equal the
// installed manifest.yaml.
func (p *Provider) GetManifest(context.Context, *pluginv1.GetManifestRequest) (*pluginv1.Manifest, error) {
	return p.Manifest, nil
}

// GetDescriptors answers with the port files and their imports, each
// once.
func (p *Provider) GetDescriptors(context.Context, *pluginv1.GetDescriptorsRequest) (*descriptorpb.FileDescriptorSet, error) {
	out := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	for _, f := range p.Ports {
		for _, fd := range DescriptorSet(f).GetFile() {
			if !seen[fd.GetName()] {
				seen[fd.GetName()] = true
				out.File = append(out.File, fd)
			}
		}
	}
	return out, nil
}

// Health answers SERVING.
func (p *Provider) Health(context.Context, *pluginv1.HealthRequest) (*pluginv1.HealthResponse, error) {
	return &pluginv1.HealthResponse{Status: pluginv1.HealthStatus_HEALTH_STATUS_SERVING}, nil
}

// Shutdown answers, then stops serving.
func (p *Provider) Shutdown(context.Context, *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	go p.Runtime.Stop()
	return &pluginv1.ShutdownResponse{}, nil
}

// OwnManifest loads the manifest.yaml beside the running executable: the
// file the host installed with it.
func OwnManifest() (*pluginv1.Manifest, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return LoadManifest(filepath.Join(filepath.Dir(exe), "manifest.yaml"))
}

// BaseURL is the first destination m declares for intent, as
// http://host:port/path_prefix (http://: the egress proxy adds TLS), or
// "" when m declares none.
func BaseURL(m *pluginv1.Manifest, intent string) string {
	for _, ci := range m.GetCredentialIntents() {
		if ci.GetName() == intent && len(ci.GetDestinations()) > 0 {
			d := ci.GetDestinations()[0]
			return "http://" + d.GetHost() + ":" + strconv.Itoa(int(d.GetPort())) + d.GetPathPrefix()
		}
	}
	return ""
}

// Succeeded is the terminal message of a call that succeeded with
// result, having had side effect se; evidence are the ids EmitEvidence
// returned for it.
func Succeeded(result proto.Message, se pluginv1.SideEffect, evidence ...string) (*pluginv1.ActionResult, error) {
	out, err := anypb.New(result)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	return &pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED, Result: out, SideEffect: se, EvidenceIds: evidence}, nil
}

// Failed is the terminal message of a call that failed, with a
// diagnostic code.
func Failed(code string) *pluginv1.ActionResult {
	return &pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: []*pluginv1.Diagnostic{{Code: code}}}
}
