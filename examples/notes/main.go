// Command notes-provider serves the numinance.ports.notes.v1 port: it reads
// and writes notes in an upstream HTTPS API through Airlock's egress proxy,
// with credential handles it asks the host for. It never sees the API key.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-dev/airlock/examples/notes/notesv1"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

type provider struct {
	plugin.Provider // Handshake, GetManifest, GetDescriptors, Health, Shutdown
	host            pluginv1.HostServiceClient
}

func main() {
	plugin.Main(plugin.ServeConfig{Register: func(s *grpc.Server, rt *plugin.Runtime) {
		m, err := plugin.OwnManifest() // the manifest.yaml installed beside the binary
		host, _, herr := plugin.DialHost()
		if err = errors.Join(err, herr); err != nil {
			fmt.Fprintln(os.Stderr, "notes-provider:", err)
			os.Exit(1)
		}
		port := []protoreflect.FileDescriptor{notesv1.File_numinance_ports_notes_v1_notes_proto}
		pluginv1.RegisterPluginServiceServer(s, &provider{Provider: plugin.Provider{Runtime: rt, Manifest: m, Ports: port}, host: host})
	}})
}

// Invoke serves one call: exactly one message, since both methods are CALLs.
func (p *provider) Invoke(r *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer) error {
	res, err := p.invoke(stream.Context(), r.GetEnvelope())
	if err != nil {
		res = plugin.Failed(err.Error())
	}
	return stream.Send(res)
}

func (p *provider) invoke(ctx context.Context, env *pluginv1.Envelope) (*pluginv1.ActionResult, error) {
	inv := env.GetContext().GetInvocationId()
	switch env.GetMethod() {
	case "numinance.ports.notes.v1.Notes/ListNotes":
		var in notesv1.ListNotesRequest
		out := &notesv1.ListNotesResponse{}
		if err := env.GetRequest().UnmarshalTo(&in); err != nil {
			return nil, errors.New("bad_request")
		}
		if err := p.call(ctx, inv, "notes.read", "GET", "notes?folder="+url.QueryEscape(in.GetFolder()), nil, &out.Notes); err != nil {
			return nil, err
		}
		return plugin.Succeeded(out, pluginv1.SideEffect_SIDE_EFFECT_READ)
	case "numinance.ports.notes.v1.Notes/CreateNote":
		var in notesv1.CreateNoteRequest
		note := &notesv1.Note{}
		if err := env.GetRequest().UnmarshalTo(&in); err != nil {
			return nil, errors.New("bad_request")
		}
		body, _ := json.Marshal(map[string]string{"folder": in.GetFolder(), "text": in.GetText()})
		if err := p.call(ctx, inv, "notes.write", "POST", "notes", bytes.NewReader(body), note); err != nil {
			return nil, err
		}
		// The port declares notes.created evidence: without it the host
		// records the call PARTIAL.
		payload, _ := json.Marshal(map[string]string{"note_id": note.GetId()})
		ev, err := p.host.EmitEvidence(ctx, &pluginv1.EmitEvidenceRequest{InvocationId: inv, EmitKey: "created-" + note.GetId(),
			RecordType: "notes.created", Payload: payload})
		if err != nil {
			return nil, errors.New("evidence_refused")
		}
		return plugin.Succeeded(&notesv1.CreateNoteResponse{Note: note}, pluginv1.SideEffect_SIDE_EFFECT_WRITE, ev.GetEvidenceId())
	}
	return nil, errors.New("unknown_method")
}

// call sends one request to the notes API through the egress proxy with a
// handle for intent (ctx carries the invocation's key), and decodes the answer.
func (p *provider) call(ctx context.Context, inv, intent, method, path string, body io.Reader, out any) error {
	cred, err := p.host.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: inv, Intent: intent})
	if err != nil {
		return errors.New("credential_refused")
	}
	req, err := http.NewRequestWithContext(ctx, method, plugin.BaseURL(p.Manifest, intent)+path, body)
	if err != nil {
		return errors.New("bad_destination")
	}
	resp, err := plugin.ProxyClient(cred.GetHandle(), cred.GetEgressProxy()).Do(req)
	if err != nil {
		return errors.New("upstream_unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out) != nil {
		return fmt.Errorf("upstream_%d", resp.StatusCode)
	}
	return nil
}
