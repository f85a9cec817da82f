package pluginv1

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Stock clients inside the sandbox, configured by nothing but the
// environment the host gives them (HTTPS_PROXY with the pass, the
// intercept CA variables), reach an https:// upstream through the real
// proxy at every level this machine allows.
func TestStockClientsInSandbox(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixtureWith(t, time.Minute)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is required (make tools installs it)")
	}
	url := "https://tickets.demo.airlock.test:" + f.upPort + "/api/tickets"
	dest := broker.Destination{Host: "tickets.demo.airlock.test", Port: mustAtoi(f.upPort), PathPrefix: "/api/"}
	// The handle is the API key (placeholder injection), as an SDK sends
	// it: one per process, since a plugin's handles die with its process.
	clients := map[string]func(handle string) []string{
		"curl": func(h string) []string {
			return []string{curl, "-sS", "--fail", "-H", "Authorization: Bearer " + h, url}
		},
		"python": func(h string) []string {
			return []string{testenv.Python(), "-c", `import urllib.request, sys
req = urllib.request.Request(sys.argv[1], headers={"Authorization": sys.argv[2]})
sys.stdout.write(urllib.request.urlopen(req, timeout=20).read().decode())`, url, "Bearer " + h}
		},
	}
	levels := sandbox.Detect().Levels()
	for _, level := range levels {
		for name, args := range clients {
			t.Run(string(level)+"/"+name, func(t *testing.T) {
				iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "client", InvocationID: "inv-clients-" + string(level) + "-" + name,
					Intent: "tickets.read", Destinations: []broker.Destination{dest}, Deadline: time.Now().Add(5 * time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				argv := args(iss.Handle)
				var logs testenv.SyncBuffer
				opts := f.opts
				opts.Sandbox = sandbox.Config{Level: level}
				p, err := launch.Start(context.Background(), launch.Request{Plugin: "client", Path: argv[0], Args: argv[1:],
					PassDests: []broker.Destination{dest}},
					opts.LaunchOptions(slog.New(slog.NewTextHandler(&logs, nil))))
				if err != nil {
					t.Fatal(err)
				}
				out, _ := io.ReadAll(p.Stdout())
				<-p.Exited()
				if err := p.Err(); err != nil || !strings.Contains(string(out), "T-1") {
					t.Fatalf("%s: %v\n%s\n%s", name, err, out, logs.String())
				}
				if got := <-f.seenAuth; got != "Bearer "+upstreamSecret {
					t.Fatalf("the upstream saw %q", got)
				}
			})
		}
	}
}
