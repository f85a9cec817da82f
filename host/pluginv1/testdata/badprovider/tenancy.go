package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// What the launch gave this process, read before plugin.Main removes the
// keys from the environment: the raw-client behaviour dials the host
// without the SDK.
var (
	launchPluginKey = os.Getenv(plugin.PluginKeyEnv)
	launchHostAddr  = os.Getenv(plugin.HostAddrEnv)
)

// serveWithoutKeys is a provider built on an SDK older than launch keys:
// the same PluginService, served on a plain gRPC server that answers any
// caller.
func serveWithoutKeys(m *pluginv1.Manifest) {
	if os.Getenv(plugin.CookieEnv) != plugin.MagicCookie {
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "nump")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sock := filepath.Join(dir, "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := grpc.NewServer()
	pluginv1.RegisterPluginServiceServer(srv, &keyless{bad: bad{rt: &plugin.Runtime{Version: 1, Socket: sock}, m: m}, srv: srv})
	fmt.Print(plugin.FormatHandshakeLine(1, sock))
	_ = srv.Serve(l)
	os.RemoveAll(dir)
	os.Exit(0)
}

type keyless struct {
	bad
	srv *grpc.Server
}

func (k *keyless) Shutdown(context.Context, *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	go k.srv.Stop()
	return &pluginv1.ShutdownResponse{}, nil
}

// borrow: invocation A (CreateTicket) announces its id and waits; B (a
// ListTickets, a dry run in the test) calls HostService with A's id, then
// lets A make the same calls with its own. Each answers with the codes it
// got.
var borrow = struct {
	mu   sync.Mutex
	id   string
	done chan struct{}
}{done: make(chan struct{})}

func borrowInvoke(r *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer, hs pluginv1.HostServiceClient) error {
	ctx := stream.Context()
	inv := r.GetEnvelope().GetContext().GetInvocationId()
	if strings.HasSuffix(r.GetEnvelope().GetMethod(), "/CreateTicket") {
		borrow.mu.Lock()
		borrow.id = inv
		borrow.mu.Unlock()
		if err := stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_RUNNING}); err != nil {
			return err
		}
		select {
		case <-borrow.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: fourCalls(ctx, hs, inv)})
	}
	borrow.mu.Lock()
	a := borrow.id
	borrow.mu.Unlock()
	d := fourCalls(ctx, hs, a)
	close(borrow.done)
	return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: d})
}

// fourCalls makes Log, EmitEvidence, RequestCredential (a write intent)
// and ReportProgress for invocation id with ctx.
func fourCalls(ctx context.Context, hs pluginv1.HostServiceClient, id string) []*pluginv1.Diagnostic {
	_, e1 := hs.Log(ctx, &pluginv1.LogRequest{InvocationId: id, Level: "info", ReasonCode: "step"})
	_, e2 := hs.EmitEvidence(ctx, &pluginv1.EmitEvidenceRequest{InvocationId: id, RecordType: "tickets.created",
		EmitKey: "borrow", Payload: []byte(`{}`)})
	_, e3 := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{InvocationId: id, Intent: "tickets.write"})
	_, e4 := hs.ReportProgress(ctx, &pluginv1.ReportProgressRequest{InvocationId: id, Completed: 1, Total: 2})
	return []*pluginv1.Diagnostic{{Code: "Log:" + code(e1)}, {Code: "EmitEvidence:" + code(e2)},
		{Code: "RequestCredential:" + code(e3)}, {Code: "ReportProgress:" + code(e4)}}
}

// rawClient: HostService calls made other than through the SDK's client
// with the Invoke's context.
func rawClient(r *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer, hs pluginv1.HostServiceClient) error {
	ctx := stream.Context()
	inv := r.GetEnvelope().GetContext().GetInvocationId()
	conn, err := grpc.NewClient("unix://"+strings.TrimPrefix(launchHostAddr, "unix:"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	raw := pluginv1.NewHostServiceClient(conn)
	log := &pluginv1.LogRequest{InvocationId: inv, Level: "info"}
	_, e1 := raw.Log(ctx, log)
	_, e2 := raw.Log(metadata.AppendToOutgoingContext(ctx, plugin.PluginKeyMetadata, launchPluginKey), log)
	_, e3 := hs.Log(context.Background(), log)
	_, e4 := hs.Log(ctx, log)
	return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: []*pluginv1.Diagnostic{
		{Code: "raw:" + code(e1)}, {Code: "raw-with-plugin-key:" + code(e2)},
		{Code: "sdk-background-context:" + code(e3)}, {Code: "sdk-invoke-context:" + code(e4)}}})
}

func code(err error) string { return status.Code(err).String() }
