package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// The WebSocket upstream of the tests, at wss://api.example.com:port/ws.
// It accepts subprotocol "chat.v1" and answers each text message:
//
//	"auth"        the handshake's Authorization header (an echo)
//	"split"       the secret, as one message of two frames
//	"split-msgs"  the secret's halves as two messages
//	"hold"        nothing
//	anything else "echo:<msg>"; binary messages come back as they are
type wsUpstream struct {
	port int
	mu   sync.Mutex
	auth []string // the Authorization of each handshake
}

func startWSUpstream(t testing.TB, ca *testenv.CA) *wsUpstream {
	t.Helper()
	u := &wsUpstream{}
	cert := ca.Issue(t, "api.example.com")
	srv := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		Handler: http.HandlerFunc(u.serve), ErrorLog: nil}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.port = l.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *wsUpstream) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	u.mu.Lock()
	u.auth = append(u.auth, auth)
	u.mu.Unlock()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"chat.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := context.Background()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			_ = c.Write(ctx, typ, msg)
			continue
		}
		half := len(testSecret) / 2
		switch string(msg) {
		case "auth":
			err = c.Write(ctx, typ, []byte(auth))
		case "split":
			var mw interface {
				Write([]byte) (int, error)
				Close() error
			}
			if mw, err = c.Writer(ctx, typ); err == nil {
				_, _ = mw.Write([]byte("x:" + testSecret[:half]))
				_, _ = mw.Write([]byte(testSecret[half:] + ":y"))
				err = mw.Close()
			}
		case "split-msgs":
			if err = c.Write(ctx, typ, []byte("x:"+testSecret[:half])); err == nil {
				err = c.Write(ctx, typ, []byte(testSecret[half:]+":y"))
			}
		case "hold":
		default:
			err = c.Write(ctx, typ, append([]byte("echo:"), msg...))
		}
		if err != nil {
			return
		}
	}
}

func (u *wsUpstream) handshakes() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.auth)
}

func (u *wsUpstream) lastAuth(t *testing.T) string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.auth) == 0 {
		t.Fatal("the WebSocket upstream saw no handshake")
	}
	return u.auth[len(u.auth)-1]
}

// wsFixture is an intercepting proxy and the WebSocket upstream.
type wsFixture struct {
	*fixture
	ws     *wsUpstream
	caFile string
}

func newWSFixture(t testing.TB, mutate func(*Config)) *wsFixture {
	t.Helper()
	ca := testenv.NewCA(t)
	ws := startWSUpstream(t, ca)
	f, caFile := newStreamFixture(t, ca, mutate)
	return &wsFixture{fixture: f, ws: ws, caFile: caFile}
}

func (w *wsFixture) issueWS(t testing.TB, intent, inv string, dests ...broker.Destination) string {
	t.Helper()
	return w.issueAt(t, intent, inv, w.ws.port, dests...)
}

// wsURL is the socket's URL: ws:// for the plain mode (the proxy adds
// TLS), wss:// for a tunnel.
func (w *wsFixture) wsURL(scheme string) string {
	return scheme + "://api.example.com:" + strconv.Itoa(w.ws.port) + "/ws"
}

// dialGo opens the socket with coder/websocket through the proxy, as
// HTTP_PROXY / HTTPS_PROXY and the intercept CA would configure it.
func (w *wsFixture) dialGo(t *testing.T, scheme, handle string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return w.dialGoWith(t, scheme, handle, nil)
}

// dialGoWith is dialGo with more handshake headers.
func (w *wsFixture) dialGoWith(t *testing.T, scheme, handle string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	pem, err := os.ReadFile(w.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: w.addr, User: url.User(handle)}),
		TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, w.wsURL(scheme), &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr},
		Subprotocols: []string{"chat.v1"}, HTTPHeader: hdr})
}

func wsRoundTrip(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_, got, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

func redacted(s string) bool {
	return !strings.Contains(s, testSecret) && strings.Contains(s, Redaction)
}
