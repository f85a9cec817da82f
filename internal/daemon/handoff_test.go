package daemon

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/handoff"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/proxy"
)

// A plugin's listener handed to airlock serve over the hand-over socket
// (as airlock host does at the namespaces level) is served for the
// plugin it was handed over for: another plugin's credential is refused
// there, while on the shared listener it is not told apart.
func TestServeHandoffServesForThePlugin(t *testing.T) {
	cfg := testConfig(t)
	r := serveBackground(t, cfg)
	api := cfg.Broker.API
	bc, err := brokerapi.Dial("unix://"+api.Socket, brokerapi.DialOptions{TokenFile: api.TokenFile})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	passOf := func(plugin string) string {
		iss, err := bc.Issue(context.Background(), broker.IssueRequest{PluginID: plugin, InvocationID: "pass-" + plugin, Pass: true,
			Destinations: []broker.Destination{{Host: "api.example.com", Port: 443}}})
		if err != nil {
			t.Fatal(err)
		}
		return iss.Handle
	}
	aPass, bPass := passOf("plugin-a"), passOf("plugin-b")

	tok, err := peerauth.ReadToken("broker.api.token_file", api.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	closer, err := handoff.Give(handoff.Path(api.Socket), tok, "plugin-b", l)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	defer closer.Close()

	// A pass is never a plain request's handle; whose it is decides the
	// refusal first on a plugin's own listener.
	for _, c := range []struct {
		addr, pass, want string
	}{
		{addr, aPass, proxy.CodeHandleNotThisPlugins},
		{addr, bPass, proxy.CodePassNotAHandle},
		{r.Proxy, aPass, proxy.CodePassNotAHandle},
	} {
		if got := plainRequestCode(t, c.addr, c.pass); got != c.want {
			t.Errorf("on %s: %q, want %q", c.addr, got, c.want)
		}
	}
}

// plainRequestCode sends an absolute-form GET with cred to the proxy at
// addr and returns the answer's X-Airlock-Error.
func plainRequestCode(t *testing.T, addr, cred string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // against a hang, not a timed assertion
	if _, err := io.WriteString(c, "GET http://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\nProxy-Authorization: Bearer "+cred+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get(proxy.HeaderError)
}
