package pluginv1

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Two plugins behind the real egress proxy, each with its proxy listener
// handed over (as airlock dev and airlock host do): plugin "attacker",
// sandboxed at each level, sends plugin "victim"'s live handle and is
// refused handle_not_this_plugins — the upstream never sees the victim's
// secret on its behalf — while its own handle works. The attacker is a
// Python script and a stock client (curl), as Executa plugins and tools
// run.
func TestTenantCannotUseAnotherPluginsHandle(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	ctx := context.Background()
	dest := broker.Destination{Host: "tickets.demo.airlock.test", Port: mustAtoi(f.upPort), PathPrefix: "/api/"}
	issue := func(plugin, inv string) string {
		iss, err := f.b.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: inv, Intent: "tickets.read",
			Destinations: []broker.Destination{dest}, Deadline: time.Now().Add(5 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return iss.Handle
	}
	victim := issue("victim", "inv-victim")
	url := "http://tickets.demo.airlock.test:" + f.upPort + "/api/tickets"
	serve := func(plugin string, l net.Listener) (io.Closer, error) {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = f.px.ServeSandbox(sctx, plugin, l); close(done) }()
		return closer(func() { cancel(); <-done }), nil
	}
	dir := filepath.Dir(providerBin) // readable by every plugin uid
	script := filepath.Join(dir, "tenant.py")
	if err := fsutil.CopyFile("testdata/tenant/tenant.py", script, 0o644); err != nil {
		t.Fatal(err)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is required (make tools installs it)")
	}
	for _, level := range sandbox.Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			opts := f.opts
			opts.Sandbox = sandbox.Config{Level: level, ReadOnly: []string{dir}}
			opts.ProxyServe = serve
			lo := opts.LaunchOptions(slog.New(slog.NewTextHandler(io.Discard, nil)))
			for _, name := range []string{"python", "curl"} {
				// A handle of its own per process: the attacker's handles
				// die with each of its processes.
				own := issue("attacker", "inv-attacker-"+string(level)+"-"+name)
				argv := map[string][]string{
					"python": {testenv.Python(), script},
					"curl": {curl, "-sS", "-o", "/dev/null", "-w", `{"as":"victim","status":%{http_code},"error":"%header{x-airlock-error}"}\n`,
						"--proxy-header", "Proxy-Authorization: Bearer " + victim, url, "--next",
						"-sS", "-o", "/dev/null", "-w", `{"as":"own","status":%{http_code},"error":"%header{x-airlock-error}"}\n`,
						"--proxy-header", "Proxy-Authorization: Bearer " + own, url},
				}[name]
				t.Run(name, func(t *testing.T) {
					p, err := launch.Start(ctx, launch.Request{Plugin: "attacker", Path: argv[0], Args: argv[1:],
						Env: []string{"TENANT_URL=" + url, "TENANT_VICTIM=" + victim, "TENANT_OWN=" + own}}, lo)
					if err != nil {
						t.Fatal(err)
					}
					got := map[string]struct {
						Status int    `json:"status"`
						Error  string `json:"error"`
					}{}
					sc := bufio.NewScanner(p.Stdout())
					for sc.Scan() {
						var r struct {
							As     string `json:"as"`
							Status int    `json:"status"`
							Error  string `json:"error"`
						}
						if json.Unmarshal(sc.Bytes(), &r) == nil {
							got[r.As] = struct {
								Status int    `json:"status"`
								Error  string `json:"error"`
							}{r.Status, r.Error}
						}
					}
					<-p.Exited()
					if v := got["victim"]; v.Status != http.StatusForbidden || v.Error != "handle_not_this_plugins" {
						t.Errorf("another plugin's handle: %+v, want 403 handle_not_this_plugins", v)
					}
					if o := got["own"]; o.Status != http.StatusOK {
						t.Errorf("its own handle: %+v, want 200", o)
					}
					// The upstream saw the secret once: for the attacker's own
					// handle, never for the victim's.
					seen := 0
					for {
						select {
						case a := <-f.seenAuth:
							if !strings.HasSuffix(a, upstreamSecret) {
								t.Errorf("the upstream saw %q", a)
							}
							seen++
							continue
						default:
						}
						break
					}
					if seen != 1 {
						t.Errorf("the upstream was called %d times, want once (the attacker's own handle)", seen)
					}
				})
			}
		})
	}
}

type closer func()

func (c closer) Close() error { c(); return nil }
