package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// An open socket holds one of its plugin's concurrency slots until it
// closes: with a cap of one, a second socket (or any request) is refused
// while the first is open, and admitted after.
func TestWebSocketHoldsConcurrencySlot(t *testing.T) {
	w := newWSFixture(t, func(c *Config) { c.Limits.PerPluginConcurrency = 1 })
	first, _, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-slot-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := wsRoundTrip(t, first, websocket.MessageText, "hello"); got != "echo:hello" {
		t.Fatalf("got %q", got)
	}
	_, resp, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-slot-2"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get(HeaderError) != CodeTooManyConcurrent {
		t.Fatalf("a second socket beside the first: err %v, resp %+v", err, resp)
	}
	if err := first.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"invocation":"inv-slot-1"`)
	second, _, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-slot-3"))
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.CloseNow()
}

// A socket in a tunnel opened with the plugin pass closes with 1008 when
// the pass is revoked, though its own handle is still live.
func TestWebSocketLostPass(t *testing.T) {
	w := newWSFixture(t, nil)
	iss, err := w.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "pass-ws", Pass: true,
		Destinations: []broker.Destination{{Host: "api.example.com", Port: w.ws.Port}}})
	if err != nil {
		t.Fatal(err)
	}
	h := w.issueWS(t, "api.placeholder", "inv-ws-pass")
	c, resp, err := w.dialGoWith(t, "wss", iss.Handle, http.Header{"Authorization": {"Bearer " + h}})
	if err != nil {
		t.Fatalf("dial: %v (%+v)", err, resp)
	}
	defer c.CloseNow()
	if a := w.ws.LastAuth(t); a != "Bearer "+testSecret {
		t.Fatalf("the upstream saw Authorization %q", a)
	}
	if _, err := w.b.RevokeInvocation(context.Background(), "pass-ws"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation {
		t.Fatalf("after the pass was revoked: %v", err)
	}
}

// An open gRPC stream holds its plugin's concurrency slot: with a cap
// of one, a second call is refused with RESOURCE_EXHAUSTED while the
// first stream is open, and admitted once it ends.
func TestGRPCStreamHoldsConcurrencySlot(t *testing.T) {
	g := newGRPCFixture(t)
	g.proxy.limits.Store(newLimiter(LimitsConfig{PerHandleRPS: 1000, PerHandleBurst: 1000, PerPluginRPS: 1000, PerPluginBurst: 1000, PerPluginConcurrency: 1}))
	h := g.issueGRPC(t, "api.write", "inv-grpc-slot")
	cc, err := grpc.NewClient("passthrough:///"+g.target(), grpc.WithContextDialer(connectDialer(g.addr, h)),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: interceptPool(t, g.caFile)})),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(testenv.RawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/t.T/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	in, out := []byte("x"), []byte(nil)
	if err := st.SendMsg(&in); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(&out); err != nil {
		t.Fatal(err)
	}
	err = cc.Invoke(ctx, "/t.T/Unary", &in, &out)
	if s := status.Convert(err); s.Code() != codes.ResourceExhausted || !strings.HasPrefix(s.Message(), "airlock "+CodeTooManyConcurrent) {
		t.Fatalf("a second call beside the stream: %v", err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(&out); err != io.EOF {
		t.Fatalf("the stream's end: %v", err)
	}
	waitAudit(t, g.fixture, `"path":"/t.T/Bidi"`, `"status":200`)
	if err := cc.Invoke(ctx, "/t.T/Unary", &in, &out); err != nil {
		t.Fatalf("after the stream ended: %v", err)
	}
}

// interceptPool is a pool of the certificates in file (the intercept
// CA, as SSL_CERT_FILE names it to a plugin).
func interceptPool(t testing.TB, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatal("the CA file holds no certificate")
	}
	return p
}
