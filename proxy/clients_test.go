package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The Go client runs as a subprocess (this test binary, re-executed), so
// that net/http reads HTTP_PROXY from a fresh environment exactly as a
// plugin's would.
func TestMain(m *testing.M) {
	if u := os.Getenv("AIRLOCK_TEST_GO_CLIENT_URL"); u != "" {
		resp, err := http.Get(u) // DefaultTransport: Proxy = ProxyFromEnvironment
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d\n%s", resp.StatusCode, body)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Each client is configured only through the environment: the handle is
// the proxy URL's user name. The upstream must see the secret, the client
// never (the upstream echoes the request).
func TestRealClients(t *testing.T) {
	f := newFixture(t, nil)
	clients := []struct {
		name  string
		proxy func(handle string) string
		cmd   func(url string) *exec.Cmd
	}{
		{"go net/http", func(h string) string { return "http://" + h + "@" + f.addr }, func(u string) *exec.Cmd {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = append(c.Env, "AIRLOCK_TEST_GO_CLIENT_URL="+u)
			return c
		}},
		{"curl", func(h string) string { return "http://" + h + "@" + f.addr }, func(u string) *exec.Cmd {
			return exec.Command("curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", u)
		}},
		{"python3 urllib", func(h string) string { return "http://" + h + ":x@" + f.addr }, func(u string) *exec.Cmd {
			return exec.Command("python3", "-c", `import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    print(r.status); print(r.read().decode())`, u)
		}},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			bin := strings.Fields(c.name)[0]
			if bin == "go" {
				bin = os.Args[0]
			}
			if _, err := exec.LookPath(bin); err != nil {
				testenv.Missing(t, bin)
			}
			h := f.issue(t, "api.write", "inv-"+strings.ReplaceAll(c.name, " ", "-"))
			cmd := c.cmd(f.url("/echo"))
			cmd.Env = append(cmd.Env, "HTTP_PROXY="+c.proxy(h), "http_proxy="+c.proxy(h), "PATH="+os.Getenv("PATH"),
				"HOME="+t.TempDir(), "NO_PROXY=", "no_proxy=")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			run := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
			run.Env = cmd.Env // only the proxy settings: never a direct request
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
