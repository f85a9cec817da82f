package proxy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// realClient is a stock HTTP client run as its own process, configured
// only through the environment a plugin gets.
type realClient struct {
	name  string
	proxy func(addr, handle string) string // the proxy URL with the handle
	cmd   func(url string) *exec.Cmd
}

func realClients() []realClient {
	return []realClient{
		{"go net/http", func(a, h string) string { return "http://" + h + "@" + a }, func(u string) *exec.Cmd {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = append(c.Env, "AIRLOCK_TEST_GO_CLIENT_URL="+u)
			return c
		}},
		{"curl", func(a, h string) string { return "http://" + h + "@" + a }, func(u string) *exec.Cmd {
			return exec.Command("curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", u)
		}},
		// urllib sends proxy credentials only with a password.
		{"python3 urllib", func(a, h string) string { return "http://x:" + h + "@" + a }, func(u string) *exec.Cmd {
			return exec.Command("python3", "-c", `import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    print(r.status); print(r.read().decode())`, u)
		}},
	}
}

// runRealClients has each client fetch u (the upstream's /echo) with a
// fresh handle; env gives the proxy variables for a proxy URL. The
// upstream must see the secret, the client never (the upstream echoes
// the request).
func runRealClients(t *testing.T, f *fixture, u string, env func(proxyURL string) []string) {
	for _, c := range realClients() {
		t.Run(c.name, func(t *testing.T) {
			bin := strings.Fields(c.name)[0]
			if bin == "go" {
				bin = os.Args[0]
			}
			if _, err := exec.LookPath(bin); err != nil {
				testenv.Missing(t, bin)
			}
			h := f.issue(t, "api.write", "inv-"+strings.ReplaceAll(c.name, " ", "-")+"-"+strings.SplitN(u, ":", 2)[0])
			cmd := c.cmd(u)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			run := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
			// Only the proxy settings: never a direct request.
			run.Env = append(append(cmd.Env, env(c.proxy(f.addr, h))...), "PATH="+os.Getenv("PATH"),
				"HOME="+t.TempDir(), "NO_PROXY=", "no_proxy=")
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.name, err, out)
			}
			if !strings.Contains(string(out), "200") {
				t.Fatalf("%s did not get 200:\n%s", c.name, out)
			}
			if strings.Contains(string(out), testSecret) {
				t.Fatalf("%s saw the secret:\n%s", c.name, out)
			}
			if !strings.Contains(string(out), Redaction) {
				t.Fatalf("%s: the echo was not redacted:\n%s", c.name, out)
			}
			if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
				t.Fatalf("upstream saw Authorization %q", got)
			}
		})
	}
}

// Each client is configured only through the environment: the handle is
// in the proxy URL.
func TestRealClients(t *testing.T) {
	f := newFixture(t, nil)
	runRealClients(t, f, f.url("/echo"), func(p string) []string { return []string{"HTTP_PROXY=" + p, "http_proxy=" + p} })
}
