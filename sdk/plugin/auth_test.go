package plugin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// Keys as a host makes them (the test's own; any 256-bit values).
const (
	testHostKey   = "host-key-3q2-7dVvJ0m4XxQ9v1s6hWm8Zt0cR5yLkP2aN"
	testPluginKey = "plugin-key-b6E1qk9Zr4Tn0Wc7yHs2Lg5Vd8Mx3Jp1Fu"
)

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// hostCall is one HostService.Log the stand-in host received.
type hostCall struct {
	md  metadata.MD
	req *pluginv1.LogRequest
}

// standInHost records the HostService.Log calls a provider makes.
type standInHost struct {
	pluginv1.UnimplementedHostServiceServer
	calls chan hostCall
}

func (h *standInHost) Log(ctx context.Context, r *pluginv1.LogRequest) (*pluginv1.LogResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h.calls <- hostCall{md: md, req: r}
	return &pluginv1.LogResponse{}, nil
}

// startHost serves a stand-in HostService on a unix socket and returns
// its address in HostAddrEnv's form.
func startHost(t *testing.T) (string, <-chan hostCall) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "h.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h := &standInHost{calls: make(chan hostCall, 64)}
	srv := grpc.NewServer()
	pluginv1.RegisterHostServiceServer(srv, h)
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return "unix:" + sock, h.calls
}

// counting answers Health and counts the calls that reached it; its
// Invoke calls the host through DialHost with the stream's context and
// with a background one.
type counting struct {
	pluginv1.UnimplementedPluginServiceServer
	handled atomic.Int32
}

func (c *counting) Health(context.Context, *pluginv1.HealthRequest) (*pluginv1.HealthResponse, error) {
	c.handled.Add(1)
	return &pluginv1.HealthResponse{Status: pluginv1.HealthStatus_HEALTH_STATUS_SERVING}, nil
}

func (c *counting) GetManifest(context.Context, *pluginv1.GetManifestRequest) (*pluginv1.Manifest, error) {
	c.handled.Add(1)
	return &pluginv1.Manifest{}, nil
}

func (c *counting) Invoke(_ *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer) error {
	c.handled.Add(1)
	hs, conn, err := plugin.DialHost()
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := hs.Log(stream.Context(), &pluginv1.LogRequest{InvocationId: "inv-1", ReasonCode: "invoke-context"}); err != nil {
		return err
	}
	if _, err := hs.Log(context.Background(), &pluginv1.LogRequest{InvocationId: "inv-1", ReasonCode: "background"}); err != nil {
		return err
	}
	return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED})
}

// serve runs Serve on getenv in the background until the test ends and
// returns a client of its socket.
func serve(t *testing.T, getenv func(string) string, p pluginv1.PluginServiceServer) pluginv1.PluginServiceClient {
	t.Helper()
	ready := make(chan *plugin.Runtime, 1)
	var rt *plugin.Runtime
	served := make(chan error, 1)
	go func() {
		served <- plugin.Serve(plugin.ServeConfig{Getenv: getenv,
			Register: func(s *grpc.Server, r *plugin.Runtime) {
				pluginv1.RegisterPluginServiceServer(s, p)
				rt = r
			},
			Stdout: writerFunc(func(b []byte) (int, error) { ready <- rt; return len(b), nil }),
		})
	}()
	select {
	case rt = <-ready:
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		rt.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+rt.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginv1.NewPluginServiceClient(conn)
}

func launchEnv(hostAddr string) func(string) string {
	env := map[string]string{
		plugin.CookieEnv: plugin.MagicCookie, plugin.ProtocolsEnv: "1", plugin.HostAddrEnv: hostAddr,
		plugin.HostKeyDigestEnv: digest(testHostKey), plugin.PluginKeyEnv: testPluginKey,
	}
	return func(k string) string { return env[k] }
}

// Only calls that carry the host's key reach a handler; every other is
// Unauthenticated and reported to the host with the method, the reason
// and the caller's uid and pid — except the host's own launch probe.
func TestServeAdmitsOnlyTheHostsKey(t *testing.T) {
	addr, reports := startHost(t)
	p := &counting{}
	c := serve(t, launchEnv(addr), p)
	health := "/numinance.plugin.v1.PluginService/Health"
	manifest := "/numinance.plugin.v1.PluginService/GetManifest"
	for _, tt := range []struct {
		name       string
		md         []string
		wantCode   codes.Code
		wantReport string // the reason; "" none
	}{
		{"no key", nil, codes.Unauthenticated, "no_key"},
		{"wrong key", []string{plugin.HostKeyMetadata, testPluginKey}, codes.Unauthenticated, "wrong_key"},
		{"the digest as the key", []string{plugin.HostKeyMetadata, digest(testHostKey)}, codes.Unauthenticated, "wrong_key"},
		{"two keys", []string{plugin.HostKeyMetadata, testHostKey, plugin.HostKeyMetadata, "x"}, codes.Unauthenticated, "wrong_key"},
		{"the host's probe", []string{plugin.ProbeKeyMetadata, testHostKey}, codes.Unauthenticated, ""},
		{"a forged probe", []string{plugin.ProbeKeyMetadata, "guess"}, codes.Unauthenticated, "no_key"},
		{"the host's key", []string{plugin.HostKeyMetadata, testHostKey}, codes.OK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := p.handled.Load()
			ctx := metadata.AppendToOutgoingContext(context.Background(), tt.md...)
			_, err := c.Health(ctx, &pluginv1.HealthRequest{})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("code %v, want %v", status.Code(err), tt.wantCode)
			}
			if ran := p.handled.Load() != before; ran != (tt.wantCode == codes.OK) {
				t.Fatalf("the handler ran: %v", ran)
			}
			if err != nil && (strings.Contains(err.Error(), testHostKey) || strings.Contains(err.Error(), testPluginKey)) {
				t.Fatal("the refusal echoes a key")
			}
			// Reports arrive in order: a refused GetManifest after the
			// call marks where this call's report would have been.
			_, err = c.GetManifest(context.Background(), &pluginv1.GetManifestRequest{})
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("marker call: %v", err)
			}
			want := []string{tt.wantReport, "no_key"}
			methods := []string{health, manifest}
			if tt.wantReport == "" {
				want, methods = want[1:], methods[1:]
			}
			for i, reason := range want {
				r := <-reports
				f := r.req.GetFields()
				if r.req.GetInvocationId() != "" || f["reason"] != reason || f["rpc"] != methods[i] ||
					f["caller_uid"] != strconv.Itoa(os.Getuid()) || f["caller_pid"] != strconv.Itoa(os.Getpid()) {
					t.Fatalf("report %d: %v %v, want %s of %s", i, r.req, f, reason, methods[i])
				}
				if got := r.md.Get(plugin.ReportMetadata); len(got) != 1 || got[0] != plugin.ReportRefused {
					t.Fatalf("report not marked: %v", r.md)
				}
				if got := r.md.Get(plugin.PluginKeyMetadata); len(got) != 1 || got[0] != testPluginKey {
					t.Fatal("the report does not carry the plugin's key")
				}
			}
		})
	}
}

// The invocation key that came with Invoke goes back to the host on each
// HostService call made with the Invoke's context, with the plugin's
// key; a call made with another context carries the plugin's key only.
func TestInvocationKeyReachesHostCalls(t *testing.T) {
	addr, calls := startHost(t)
	t.Setenv(plugin.HostAddrEnv, addr) // DialHost reads the process environment
	c := serve(t, launchEnv(addr), &counting{})
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		plugin.HostKeyMetadata, testHostKey, plugin.InvocationKeyMetadata, "inv-key-1")
	st, err := c.Invoke(ctx, &pluginv1.InvokeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("invoke: %v", err)
	}
	for _, want := range []struct{ reason, invocationKey string }{{"invoke-context", "inv-key-1"}, {"background", ""}} {
		r := <-calls
		if r.req.GetReasonCode() != want.reason {
			t.Fatalf("call %q, want %q", r.req.GetReasonCode(), want.reason)
		}
		if got := r.md.Get(plugin.PluginKeyMetadata); len(got) != 1 || got[0] != testPluginKey {
			t.Fatalf("%s: plugin key %v", want.reason, got)
		}
		got := r.md.Get(plugin.InvocationKeyMetadata)
		if (want.invocationKey == "" && len(got) != 0) || (want.invocationKey != "" && (len(got) != 1 || got[0] != want.invocationKey)) {
			t.Fatalf("%s: invocation key %v, want %q", want.reason, got, want.invocationKey)
		}
	}
}

// Without usable launch keys a provider does not serve; the error names
// the variable and never what it holds, and no handshake line is printed.
func TestServeNeedsLaunchKeys(t *testing.T) {
	for _, tt := range []struct {
		name, digest, key, want string
	}{
		{"no digest", "", testPluginKey, plugin.HostKeyDigestEnv + " is not set"},
		{"digest not hex", strings.Repeat("zz", 32), testPluginKey, plugin.HostKeyDigestEnv + " must be 64 hex digits"},
		{"digest short", digest(testHostKey)[:62], testPluginKey, plugin.HostKeyDigestEnv + " must be 64 hex digits"},
		{"no plugin key", digest(testHostKey), "", plugin.PluginKeyEnv + " is not set"},
		{"plugin key short", digest(testHostKey), testPluginKey[:42], plugin.PluginKeyEnv + " must be at least 43 printable characters"},
		{"plugin key with a space", digest(testHostKey), testPluginKey + " x", plugin.PluginKeyEnv + " must be at least 43 printable characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{plugin.CookieEnv: plugin.MagicCookie, plugin.ProtocolsEnv: "1",
				plugin.HostKeyDigestEnv: tt.digest, plugin.PluginKeyEnv: tt.key}
			printed := false
			err := plugin.Serve(plugin.ServeConfig{Getenv: func(k string) string { return env[k] },
				Register: func(*grpc.Server, *plugin.Runtime) {},
				Stdout:   writerFunc(func(b []byte) (int, error) { printed = true; return len(b), nil })})
			if !errors.Is(err, plugin.ErrNoLaunchKey) || !strings.Contains(err.Error(), tt.want) || printed {
				t.Fatalf("err %v (line printed: %v), want %q", err, printed, tt.want)
			}
			if tt.key != "" && strings.Contains(err.Error(), tt.key) || tt.digest != "" && strings.Contains(err.Error(), tt.digest) {
				t.Fatal("the error holds a key")
			}
		})
	}
}

// Read from the process environment, the keys are removed from it once
// read, so no process the provider starts inherits them; they still
// admit the host's calls.
func TestLaunchKeysLeaveTheEnvironment(t *testing.T) {
	addr, _ := startHost(t)
	for k, v := range map[string]string{plugin.CookieEnv: plugin.MagicCookie, plugin.ProtocolsEnv: "1", plugin.HostAddrEnv: addr,
		plugin.HostKeyDigestEnv: digest(testHostKey), plugin.PluginKeyEnv: testPluginKey} {
		t.Setenv(k, v)
	}
	c := serve(t, nil, &counting{})
	for _, k := range []string{plugin.HostKeyDigestEnv, plugin.PluginKeyEnv} {
		if _, ok := os.LookupEnv(k); ok {
			t.Errorf("%s is still in the environment", k)
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), plugin.HostKeyMetadata, testHostKey)
	if _, err := c.Health(ctx, &pluginv1.HealthRequest{}); err != nil {
		t.Fatalf("the host's call: %v", err)
	}
}
