package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Costs of the streaming protocols through Airlock, next to a direct
// call and a bare CONNECT relay (TLS end to end, nothing checked):
//
//	go test ./proxy -run '^$' -bench 'GRPC|WebSocket' -benchtime 2000x

// startConnectRelay is a bare CONNECT relay to 127.0.0.1, whatever the
// host: it splices bytes and looks at nothing.
func startConnectRelay(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, port, _ := net.SplitHostPort(req.Host)
				up, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
				if err != nil {
					return
				}
				defer up.Close()
				_, _ = io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
				go func() { _, _ = io.Copy(up, br); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return l.Addr().String()
}

// connectDialer dials addr through the CONNECT proxy at proxy, with
// handle (when set) as the Basic user name.
func connectDialer(proxy, handle string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", proxy)
		if err != nil {
			return nil, err
		}
		req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n"
		if handle != "" {
			req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(handle+":")) + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			c.Close()
			return nil, err
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != http.StatusOK {
			c.Close()
			return nil, fmt.Errorf("CONNECT: %v %v", resp, err)
		}
		return c, nil
	}
}

// grpcBenchConns opens a gRPC connection to the benchmark upstream for
// each path: direct, through a bare CONNECT relay, through Airlock.
func grpcBenchConns(b *testing.B) map[string]*grpc.ClientConn {
	g := newGRPCFixture(b)
	g.proxy.cfg.Limits.PerHandleRPS, g.proxy.cfg.Limits.PerPluginRPS = 1e9, 1e9
	g.proxy.limits.Store(newLimiter(g.proxy.cfg.Limits))
	handle := g.issueGRPC(b, "api.write", "inv-bench-grpc")
	target := "api.example.com:" + strconv.Itoa(g.port)
	relay := startConnectRelay(b)
	direct := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(g.port)))
	}
	paths := map[string]struct {
		dial  func(context.Context, string) (net.Conn, error)
		roots *x509.CertPool
	}{
		"direct":  {direct, g.ca.Pool()},
		"relay":   {connectDialer(relay, ""), g.ca.Pool()},
		"airlock": {connectDialer(g.addr, handle), interceptPool(b, g.caFile)},
	}
	conns := map[string]*grpc.ClientConn{}
	for name, p := range paths {
		cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithContextDialer(p.dial),
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.roots})),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(testenv.RawCodec{})))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		conns[name] = cc
	}
	return conns
}

// BenchmarkGRPCUnary: one unary call per op on a warm connection.
func BenchmarkGRPCUnary(b *testing.B) {
	conns := grpcBenchConns(b)
	for _, name := range []string{"direct", "relay", "airlock"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			in, out := []byte("hi"), []byte(nil)
			for b.Loop() {
				if err := conns[name].Invoke(ctx, "/t.T/Unary", &in, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGRPCStream: one message round trip per op on an open
// bidirectional stream.
func BenchmarkGRPCStream(b *testing.B) {
	conns := grpcBenchConns(b)
	for _, name := range []string{"direct", "relay", "airlock"} {
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := conns[name].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/t.T/Bidi")
			if err != nil {
				b.Fatal(err)
			}
			in, out := []byte("ping"), []byte(nil)
			for b.Loop() {
				if err := st.SendMsg(&in); err != nil {
					b.Fatal(err)
				}
				if err := st.RecvMsg(&out); err != nil {
					b.Fatal(err)
				}
			}
			_ = st.CloseSend()
		})
	}
}

// BenchmarkWebSocketRoundTrip: one text message round trip per op on an
// open socket, direct and through Airlock (both modes).
func BenchmarkWebSocketRoundTrip(b *testing.B) {
	w := newWSFixture(b, func(c *Config) { c.Limits.PerHandleRPS, c.Limits.PerPluginRPS = 1e9, 1e9 })
	handle := w.issueWS(b, "api.write", "inv-bench-ws")
	dial := func(b *testing.B, u string, tr *http.Transport) *websocket.Conn {
		c, _, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.CloseNow() })
		return c
	}
	proxyURL := http.ProxyURL(&url.URL{Scheme: "http", Host: w.addr, User: url.User(handle)})
	direct := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.ca.Pool()},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(w.ws.Port)))
		}}
	conns := map[string]*websocket.Conn{
		"direct":        dial(b, w.wsURL("wss"), direct),
		"airlock-plain": dial(b, w.wsURL("ws"), &http.Transport{Proxy: proxyURL}),
		"airlock-tunnel": dial(b, w.wsURL("wss"), &http.Transport{Proxy: proxyURL,
			TLSClientConfig: &tls.Config{RootCAs: interceptPool(b, w.caFile)}}),
	}
	for _, name := range []string{"direct", "airlock-plain", "airlock-tunnel"} {
		b.Run(name, func(b *testing.B) {
			c, ctx, msg := conns[name], context.Background(), []byte("ping")
			for b.Loop() {
				if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
					b.Fatal(err)
				}
				if _, _, err := c.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
