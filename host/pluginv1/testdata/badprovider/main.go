// Command badprovider is a plugin/v1 provider that misbehaves on purpose,
// for the host's failure-table tests. Its behaviour is the word in the
// file "behavior" beside its binary; its manifest is manifest.yaml there.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

var (
	behavior string

	hostOnce sync.Once
	hostSvc  pluginv1.HostServiceClient
	hostErr  error
)

func main() {
	exe, _ := os.Executable()
	dir := filepath.Dir(exe)
	b, _ := os.ReadFile(filepath.Join(dir, "behavior"))
	behavior = strings.TrimSpace(string(b))
	m, err := plugin.LoadManifest(filepath.Join(dir, "manifest.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch behavior {
	case "exit-silently":
		os.Exit(0)
	case "print-nothing":
		time.Sleep(time.Hour)
	case "six-fields":
		fmt.Println("1|1|unix|/tmp/nump1/p.sock|grpc|MIIB")
		time.Sleep(time.Hour)
	case "ignore-shutdown":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	case "old-sdk":
		serveWithoutKeys(m)
	case "spawn-child":
		// A child in the provider's process group that outlives nothing:
		// the host must kill it with the provider.
		child := exec.Command("/bin/sleep", "300")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	plugin.Main(plugin.ServeConfig{Register: func(s *grpc.Server, rt *plugin.Runtime) {
		pluginv1.RegisterPluginServiceServer(s, &bad{rt: rt, m: m})
	}})
}

type bad struct {
	pluginv1.UnimplementedPluginServiceServer
	rt *plugin.Runtime
	m  *pluginv1.Manifest
}

func (b *bad) Handshake(context.Context, *pluginv1.HandshakeRequest) (*pluginv1.HandshakeResponse, error) {
	r := &pluginv1.HandshakeResponse{ProtocolVersion: b.rt.Version, SpecVersion: "1.0"}
	switch behavior {
	case "bad-version":
		r.ProtocolVersion = 2
	case "extra-capability":
		r.Capabilities = []string{"vendor.turbo"}
	}
	return r, nil
}

func (b *bad) GetManifest(context.Context, *pluginv1.GetManifestRequest) (*pluginv1.Manifest, error) {
	if behavior == "manifest-differs" {
		m := proto.Clone(b.m).(*pluginv1.Manifest)
		m.CredentialIntents = append(m.CredentialIntents, &pluginv1.CredentialIntent{Name: "sneaky", Class: "write"})
		return m, nil
	}
	return b.m, nil
}

func (b *bad) GetDescriptors(context.Context, *pluginv1.GetDescriptorsRequest) (*descriptorpb.FileDescriptorSet, error) {
	set := plugin.DescriptorSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto)
	switch behavior {
	case "private-google-file":
		set.File = append(set.File, &descriptorpb.FileDescriptorProto{Name: proto.String("evil.proto"), Package: proto.String("google.evil")})
	case "altered-port":
		for _, f := range set.File {
			if f.GetPackage() == "numinance.ports.tickets.v1" {
				f.Service[0].Method[1].Options = nil // drop CreateTicket's rule
			}
		}
	}
	return set, nil
}

func (b *bad) Health(context.Context, *pluginv1.HealthRequest) (*pluginv1.HealthResponse, error) {
	switch behavior {
	case "health-zero":
		return &pluginv1.HealthResponse{}, nil
	case "not-serving":
		return &pluginv1.HealthResponse{Status: pluginv1.HealthStatus_HEALTH_STATUS_NOT_SERVING}, nil
	case "health-error":
		return nil, status.Error(codes.Internal, "broken")
	}
	return &pluginv1.HealthResponse{Status: pluginv1.HealthStatus_HEALTH_STATUS_SERVING}, nil
}

func (b *bad) Shutdown(context.Context, *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	if behavior != "ignore-shutdown" {
		go b.rt.Stop()
	}
	return &pluginv1.ShutdownResponse{}, nil
}

func (b *bad) Invoke(r *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer) error {
	ctx := stream.Context()
	inv := r.GetEnvelope().GetContext().GetInvocationId()
	ok := func(m proto.Message) *pluginv1.ActionResult {
		a, _ := anypb.New(m)
		return &pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED, Result: a}
	}
	if behavior == "context" {
		// Tells the caller the ActionContext it got (as a diagnostic)
		// and reports a cost one micro over its budget.
		ac := r.GetEnvelope().GetContext()
		b, _ := protojson.Marshal(ac)
		m := ok(&ticketsv1.ListTicketsResponse{})
		m.Diagnostics = []*pluginv1.Diagnostic{{Code: "ctx", Message: string(b)}}
		m.Cost = &pluginv1.Cost{Micros: ac.GetBudget().GetMaxCostMicros() + 1, Unit: "usd"}
		return stream.Send(m)
	}
	hostOnce.Do(func() { hostSvc, _, hostErr = plugin.DialHost() })
	if hostErr != nil {
		return hostErr
	}
	hs := hostSvc
	switch behavior {
	case "borrow":
		return borrowInvoke(r, stream, hs)
	case "raw-client":
		return rawClient(r, stream, hs)
	case "too-many-messages":
		for i := 0; i < plugin.MaxStreamMessages+1; i++ {
			if err := stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_RUNNING}); err != nil {
				return nil
			}
		}
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED})
	case "unknown-field":
		m := ok(&ticketsv1.ListTicketsResponse{})
		m.ProtoReflect().SetUnknown([]byte{0xf8, 0x3f, 0x01})
		return stream.Send(m)
	case "side-effect":
		m := ok(&ticketsv1.ListTicketsResponse{})
		m.SideEffect = pluginv1.SideEffect_SIDE_EFFECT_DESTRUCTIVE
		return stream.Send(m)
	case "status-77":
		return stream.Send(&pluginv1.ActionResult{Status: 77})
	case "side-effect-negative":
		m := ok(&ticketsv1.ListTicketsResponse{})
		m.SideEffect = -1
		return stream.Send(m)
	case "claims-partial":
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_PARTIAL})
	case "no-evidence":
		// CreateTicket declares tickets.created evidence; succeed without it.
		return stream.Send(ok(&ticketsv1.CreateTicketResponse{}))
	case "host-flood":
		for i := 0; i < 1025; i++ {
			if _, err := hs.Log(ctx, &pluginv1.LogRequest{InvocationId: inv, Level: "info"}); err != nil {
				break
			}
		}
		return stream.Send(ok(&ticketsv1.ListTicketsResponse{}))
	case "foreign-invocation":
		_, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: "someone-elses", Intent: "tickets.read"})
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED,
			Diagnostics: []*pluginv1.Diagnostic{{Code: "rejected:" + status.Code(err).String()}}})
	case "emit-duplicate-keys":
		_, err := hs.EmitEvidence(ctx, &pluginv1.EmitEvidenceRequest{InvocationId: inv, RecordType: "tickets.created",
			EmitKey: "dup", Payload: []byte(`{"a":1,"a":2,"A":3}`)})
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED,
			Diagnostics: []*pluginv1.Diagnostic{{Code: "rejected:" + status.Code(err).String()}}})
	case "undeclared-intent":
		_, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: inv, Intent: "sneaky"})
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED,
			Diagnostics: []*pluginv1.Diagnostic{{Code: "rejected:" + status.Code(err).String()}}})
	case "resolve":
		req := &ticketsv1.CreateTicketRequest{}
		_ = r.GetEnvelope().GetRequest().UnmarshalTo(req)
		var diags []*pluginv1.Diagnostic
		read := func(ref *pluginv1.Reference) string {
			st, err := hs.ResolveReference(ctx, &pluginv1.ResolveReferenceRequest{InvocationId: inv, Reference: ref})
			if err != nil {
				return status.Code(err).String()
			}
			n, chunks := 0, 0
			for {
				c, err := st.Recv()
				if err != nil {
					if status.Code(err) != codes.OK && err.Error() != "EOF" {
						return status.Code(err).String()
					}
					break
				}
				if len(c.GetData()) > plugin.MaxReferenceChunk {
					return "oversized-chunk"
				}
				n += len(c.GetData())
				chunks++
			}
			return fmt.Sprintf("ok:%d:%d", n, chunks)
		}
		for _, a := range req.GetAttachments() {
			spelled := proto.Clone(a).(*pluginv1.Reference)
			spelled.HostOnly = false // a provider cannot unmark host_only
			diags = append(diags, &pluginv1.Diagnostic{Code: read(spelled)})
		}
		forged := &pluginv1.Reference{Uri: "artifact://spec.pdf", Sha256: strings.Repeat("0", 64)}
		diags = append(diags, &pluginv1.Diagnostic{Code: "forged:" + read(forged)})
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: diags})
	case "total-flood":
		// Each RPC within its own limit, the total over 2048.
		for i := 0; i < 1000; i++ {
			_, _ = hs.Log(ctx, &pluginv1.LogRequest{InvocationId: inv, Level: "info"})
			_, _ = hs.ReportProgress(ctx, &pluginv1.ReportProgressRequest{InvocationId: inv})
		}
		for i := 0; i < 60; i++ {
			_, _ = hs.EmitEvidence(ctx, &pluginv1.EmitEvidenceRequest{InvocationId: inv, RecordType: "tickets.created",
				EmitKey: fmt.Sprint("k", i), Payload: []byte(`{}`)})
		}
		return stream.Send(ok(&ticketsv1.ListTicketsResponse{}))
	case "huge-terminal":
		// A terminal message over the 4 MiB bound.
		a := &anypb.Any{TypeUrl: "type.googleapis.com/numinance.ports.tickets.v1.ListTicketsResponse", Value: make([]byte, 5<<20)}
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED, Result: a})
	case "emit-concurrent":
		// 64 concurrent emits with one key and one content, 64 with
		// another key and 64 different contents.
		var wg sync.WaitGroup
		var mu sync.Mutex
		ids := map[string]map[string]bool{"same": {}, "differ": {}}
		refused := 0
		for i := 0; i < 64; i++ {
			for _, key := range []string{"same", "differ"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					payload := []byte(`{"n":0}`)
					if key == "differ" {
						payload = []byte(fmt.Sprintf(`{"n":%d}`, i))
					}
					r, err := hs.EmitEvidence(ctx, &pluginv1.EmitEvidenceRequest{InvocationId: inv, RecordType: "tickets.created",
						EmitKey: key, Payload: payload})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						refused++
						return
					}
					ids[key][r.GetEvidenceId()] = true
				}()
			}
		}
		wg.Wait()
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: []*pluginv1.Diagnostic{
			{Code: fmt.Sprintf("same:%d differ:%d refused:%d", len(ids["same"]), len(ids["differ"]), refused)}}})
	case "log-secrets":
		c, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: inv, Intent: "tickets.read"})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "debug: got", c.GetHandle(), "password=hunter2")
		fmt.Fprintln(os.Stderr, `debug: dsn postgres://app:hunter2@db:5432/x {"client_secret": "hunter2 two"}`)
		_, err = hs.Log(ctx, &pluginv1.LogRequest{InvocationId: inv, Level: "info", Fields: map[string]string{
			"handle": c.GetHandle(), "auth": "Bearer " + c.GetHandle(), "query": "user=a&password=hunter2",
			"password": "hunter2", "DB-Passwd": "hunter2", "apiKey": "hunter2", "private_key": "hunter2",
			"dsn": "https://u:hunter2@api.example.com/"}})
		if err != nil {
			return err
		}
		return stream.Send(ok(&ticketsv1.ListTicketsResponse{}))
	case "https":
		// An https:// call the way an SDK makes it: Go's default client,
		// configured only by the host's HTTPS_PROXY (the plugin's pass)
		// and SSL_CERT_FILE (the intercept CA), the handle as the API key.
		c, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: inv, Intent: "tickets.read"})
		if err != nil {
			return err
		}
		d := b.m.GetCredentialIntents()[0].GetDestinations()[0]
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s:%d/api/tickets", d.GetHost(), d.GetPort()), nil)
		req.Header.Set("Authorization", "Bearer "+c.GetHandle())
		code, msg := "https:", ""
		if resp, err := http.DefaultClient.Do(req); err != nil {
			code, msg = code+"error", err.Error() // the test shows it when it fails
		} else {
			resp.Body.Close()
			code += strconv.Itoa(resp.StatusCode)
		}
		// The next call opens a tunnel of its own, presenting the pass
		// again (a kept tunnel is not re-checked against the pass).
		http.DefaultClient.CloseIdleConnections()
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: []*pluginv1.Diagnostic{{Code: code, Message: msg}}})
	case "hang":
		<-ctx.Done()
		return ctx.Err()
	case "reject":
		return status.Error(codes.Internal, "no")
	}
	return stream.Send(ok(&ticketsv1.ListTicketsResponse{}))
}
