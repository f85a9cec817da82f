package proxy

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// wsFixture is an intercepting proxy and the WebSocket upstream.
type wsFixture struct {
	*fixture
	ws     *testenv.WSUpstream
	caFile string
}

func newWSFixture(t testing.TB, mutate func(*Config)) *wsFixture {
	t.Helper()
	return newWSFixtureWith(t, fixtureOpts{}, mutate)
}

// newWSFixtureWith is newWSFixture with more fixture options.
func newWSFixtureWith(t testing.TB, o fixtureOpts, mutate func(*Config)) *wsFixture {
	t.Helper()
	ca := testenv.NewCA(t)
	ws := testenv.StartWSUpstream(t, ca.Issue(t, "api.example.com"), testSecret)
	o.ca = ca
	f, caFile := newStreamFixture(t, o, mutate)
	return &wsFixture{fixture: f, ws: ws, caFile: caFile}
}

func (w *wsFixture) issueWS(t testing.TB, intent, inv string, dests ...broker.Destination) string {
	t.Helper()
	return w.issueAt(t, intent, inv, w.ws.Port, dests...)
}

// wsURL is the socket's URL: ws:// for the plain mode (the proxy adds
// TLS), wss:// for a tunnel.
func (w *wsFixture) wsURL(scheme string) string {
	return scheme + "://api.example.com:" + strconv.Itoa(w.ws.Port) + "/ws"
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
	pool := interceptPool(t, w.caFile)
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
