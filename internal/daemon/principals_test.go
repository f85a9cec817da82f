package daemon

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// host.control_principals reaches the control API as the daemon serves
// it: on the unix socket the control token names the peer's uid by its
// configured name, a principal's token file names that principal, and
// the log line of each request names it.
func TestControlPrincipalsWired(t *testing.T) {
	cfg := testConfig(t)
	uid := os.Getuid()
	aliceFile := filepath.Join(t.TempDir(), "alice.token")
	aliceTok := peerauth.NewSecret()
	if err := os.WriteFile(aliceFile, []byte(aliceTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Host.ControlPrincipals = config.ControlPrincipals{
		Tokens: []config.ControlToken{{Principal: "alice", File: aliceFile}},
		Peers:  []config.ControlPeer{{UID: &uid, Principal: "host-operator"}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 4)
	whoami := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := control.CallerFrom(r.Context())
		seen <- p.ID + " " + p.Method
	})
	l, handler, err := listenControl(cfg.Host, whoami, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := controlServer(handler)
	go srv.Serve(l)
	defer srv.Close()

	get := func(tokenFile string) int {
		t.Helper()
		c, base := ControlClient(cfg.Host.Control, ControlClientOptions{TokenFile: tokenFile})
		defer c.CloseIdleConnections()
		resp, err := c.Get(base + "/v1/whoami")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct{ file, want string }{
		{cfg.Host.ControlTokenFile, "host-operator peer"},
		{aliceFile, "alice token"},
	} {
		if code := get(tc.file); code != http.StatusOK {
			t.Fatalf("%s: %d", tc.want, code)
		}
		if got := <-seen; got != tc.want {
			t.Fatalf("the route saw %q, want %q", got, tc.want)
		}
	}
}
