package proxy

import (
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// The Node recipe of docs/intercept.md, exactly as written there, works:
// it opens a tunnel to api.example.com:443 with the plugin pass and sends
// the handle as the API key of a placeholder intent. (It failed as
// host_mismatch while it left out port: 443: Node then sends
// Host: api.example.com:80.) The proxy dials the test upstream for
// port 443.
func TestDocNodeRecipe(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node")
	}
	doc, err := os.ReadFile("../docs/intercept.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```js\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no js block in docs/intercept.md")
	}
	f, caFile := newInterceptFixture(t)
	upstream := net.JoinHostPort("127.0.0.1", strconv.Itoa(f.up.port))
	f.proxy.dialer.connect = func(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
		if addr != "127.0.0.1:443" {
			t.Errorf("dialled %s", addr)
		}
		return nd.DialContext(ctx, network, upstream)
	}
	ctx := context.Background()
	declared := []broker.Destination{{Host: "api.example.com", Port: 443}}
	pass, err := f.b.Issue(ctx, broker.IssueRequest{PluginID: "plugin-1", InvocationID: "pass-node-doc", Pass: true, Destinations: declared})
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.b.Issue(ctx, broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-node-doc", Intent: "api.placeholder",
		Destinations: declared, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	script := `const http = require("http"), https = require("https"), tls = require("tls");
const handle = process.env.API_KEY;
function onResponse(r) { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(r.statusCode + " " + (r.headers["x-airlock-error"] || "") + "\n" + b)); }
` + string(m[1])
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "node", "-e", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HTTPS_PROXY=http://airlock:" + pass.Handle + "@" + f.addr,
		"NODE_EXTRA_CA_CERTS=" + caFile, "API_KEY=" + h.Handle}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "200 ") {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if got := f.up.last(t); got.Path != "/v1/items" || got.Header.Get("Authorization") != "Bearer "+testSecret {
		t.Fatalf("upstream saw %s with Authorization %q", got.Path, got.Header.Get("Authorization"))
	}
}

// Python requests sends proxy credentials only with a password: the
// proxy URL forms docs/proxy.md gives work, and the bare handle gets 407
// because requests sends nothing.
func TestPythonRequestsProxyURL(t *testing.T) {
	if err := exec.Command(testenv.Python(), "-c", "import requests").Run(); err != nil {
		testenv.Missing(t, "python3 with requests")
	}
	f := newFixture(t, nil)
	for _, tt := range []struct {
		name string
		cred func(h string) string
		want string
	}{
		{"x:<handle>", func(h string) string { return "x:" + h }, "200"},
		{"<handle>:", func(h string) string { return h + ":" }, "200"},
		{"<handle> alone", func(h string) string { return h }, "407 " + CodeHandleMissing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := f.issue(t, "api.write", "inv-requests-"+strings.Trim(tt.name, "<>: "))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, testenv.Python(), "-c", `import sys, requests
r = requests.get(sys.argv[1], timeout=10)
print(r.status_code, r.headers.get("X-Airlock-Error", ""))`, f.url("/x"))
			p := "http://" + tt.cred(h) + "@" + f.addr
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HTTP_PROXY=" + p, "http_proxy=" + p, "NO_PROXY=", "no_proxy="}
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != strings.TrimSpace(tt.want) {
				t.Fatalf("%v: %q, want %q", err, out, tt.want)
			}
		})
	}
}
