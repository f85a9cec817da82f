// Command tickets-provider is a sample plugin/v1 provider: it lists and
// creates tickets in an upstream HTTPS API, reaching it only through
// Airlock's egress proxy with a credential handle it asks the host for. It
// never sees the API key.
//
// The plugin host starts it; run by hand it refuses to serve. It reads its
// manifest.yaml from the directory of its executable.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

func main() {
	// Serve checks the cookie and the protocol offer before Register runs,
	// so a provider started by hand says so instead of looking for files.
	plugin.Main(plugin.ServeConfig{Register: func(s *grpc.Server, rt *plugin.Runtime) {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		m, err := plugin.LoadManifest(filepath.Join(filepath.Dir(exe), "manifest.yaml"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pluginv1.RegisterPluginServiceServer(s, &provider{rt: rt, manifest: m})
	}})
}

type provider struct {
	pluginv1.UnimplementedPluginServiceServer
	rt       *plugin.Runtime
	manifest *pluginv1.Manifest

	once    sync.Once
	hostSvc pluginv1.HostServiceClient
	hostErr error
}

func (p *provider) Handshake(_ context.Context, r *pluginv1.HandshakeRequest) (*pluginv1.HandshakeResponse, error) {
	return &pluginv1.HandshakeResponse{ProtocolVersion: p.rt.Version, SpecVersion: "1.0"}, nil
}

func (p *provider) GetManifest(context.Context, *pluginv1.GetManifestRequest) (*pluginv1.Manifest, error) {
	return p.manifest, nil
}

func (p *provider) GetDescriptors(context.Context, *pluginv1.GetDescriptorsRequest) (*descriptorpb.FileDescriptorSet, error) {
	return plugin.DescriptorSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto), nil
}

func (p *provider) Health(context.Context, *pluginv1.HealthRequest) (*pluginv1.HealthResponse, error) {
	return &pluginv1.HealthResponse{Status: pluginv1.HealthStatus_HEALTH_STATUS_SERVING}, nil
}

func (p *provider) Shutdown(context.Context, *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	go p.rt.Stop() // answer first, then stop
	return &pluginv1.ShutdownResponse{}, nil
}

func (p *provider) host() (pluginv1.HostServiceClient, error) {
	p.once.Do(func() { p.hostSvc, _, p.hostErr = plugin.DialHost() })
	return p.hostSvc, p.hostErr
}

// base is the first declared destination of intent, as an http:// URL
// (the proxy adds TLS).
func (p *provider) base(intent string) string {
	for _, ci := range p.manifest.GetCredentialIntents() {
		if ci.GetName() == intent && len(ci.GetDestinations()) > 0 {
			d := ci.GetDestinations()[0]
			return "http://" + d.GetHost() + ":" + strconv.Itoa(int(d.GetPort())) + d.GetPathPrefix()
		}
	}
	return ""
}

func (p *provider) Invoke(r *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer) error {
	env := r.GetEnvelope()
	// Every HostService call below is made with the Invoke's context: it
	// carries this invocation's key, which the SDK's host client presents
	// and without which the host refuses the call.
	ctx := stream.Context()
	inv := env.GetContext().GetInvocationId()
	hs, err := p.host()
	if err != nil {
		return status.Error(codes.Unavailable, "host service unavailable")
	}
	fail := func(code string) error {
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED,
			Diagnostics: []*pluginv1.Diagnostic{{Code: code}}})
	}
	switch env.GetMethod() {
	case "numinance.ports.tickets.v1.Tickets/ListTickets":
		req := &ticketsv1.ListTicketsRequest{}
		if err := env.GetRequest().UnmarshalTo(req); err != nil {
			return fail("bad_request")
		}
		cred, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: inv, Intent: "tickets.read"})
		if err != nil {
			return fail("credential_refused")
		}
		get, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base("tickets.read")+"tickets?project="+url.QueryEscape(req.GetProject()), nil)
		traced(ctx, get)
		resp, err := plugin.ProxyClient(cred.GetHandle(), cred.GetEgressProxy()).Do(get)
		if err != nil {
			return fail("upstream_unreachable")
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fail("upstream_" + strconv.Itoa(resp.StatusCode))
		}
		var tickets []*ticketsv1.Ticket
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tickets); err != nil {
			return fail("upstream_bad_json")
		}
		out, _ := anypb.New(&ticketsv1.ListTicketsResponse{Tickets: tickets})
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED, Result: out,
			SideEffect: pluginv1.SideEffect_SIDE_EFFECT_READ})
	case "numinance.ports.tickets.v1.Tickets/CreateTicket":
		req := &ticketsv1.CreateTicketRequest{}
		if err := env.GetRequest().UnmarshalTo(req); err != nil {
			return fail("bad_request")
		}
		if err := stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_RUNNING}); err != nil {
			return err
		}
		cred, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: inv, Intent: "tickets.write"})
		if err != nil {
			return fail("credential_refused")
		}
		body, _ := json.Marshal(map[string]string{"project": req.GetProject(), "title": req.GetTitle(), "body": req.GetBody()})
		post, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.base("tickets.write")+"tickets", bytes.NewReader(body))
		post.Header.Set("Content-Type", "application/json")
		traced(ctx, post)
		resp, err := plugin.ProxyClient(cred.GetHandle(), cred.GetEgressProxy()).Do(post)
		if err != nil {
			return fail("upstream_unreachable")
		}
		defer resp.Body.Close()
		var t ticketsv1.Ticket
		if resp.StatusCode != http.StatusCreated || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t) != nil {
			return fail("upstream_" + strconv.Itoa(resp.StatusCode))
		}
		payload, _ := json.Marshal(map[string]string{"ticket_id": t.GetId()})
		ev, err := hs.EmitEvidence(ctx, &pluginv1.EmitEvidenceRequest{InvocationId: inv, EmitKey: "created-" + t.GetId(),
			RecordType: "tickets.created", Payload: payload})
		if err != nil {
			return fail("evidence_refused")
		}
		out, _ := anypb.New(&ticketsv1.CreateTicketResponse{Ticket: &t})
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED, Result: out,
			EvidenceIds: []string{ev.GetEvidenceId()}, SideEffect: pluginv1.SideEffect_SIDE_EFFECT_WRITE})
	}
	return status.Error(codes.Unimplemented, "method not provided")
}

// traced sends the host's traceparent for this invocation with r, when
// the host traces: the egress proxy's span of the request joins the
// invocation's trace.
func traced(ctx context.Context, r *http.Request) {
	if tp := plugin.Traceparent(ctx); tp != "" {
		r.Header.Set("traceparent", tp)
	}
}
