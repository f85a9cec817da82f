package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// grpcFixture is an intercepting proxy and a TLS gRPC upstream at
// api.example.com:port.
type grpcFixture struct {
	*fixture
	caFile string
	port   int
}

func newGRPCFixture(t testing.TB) *grpcFixture {
	t.Helper()
	return newGRPCFixtureWith(t, fixtureOpts{})
}

// newGRPCFixtureWith is newGRPCFixture with more fixture options.
func newGRPCFixtureWith(t testing.TB, o fixtureOpts) *grpcFixture {
	t.Helper()
	o.ca = testenv.NewCA(t)
	port := testenv.StartGRPCUpstream(t, o.ca.Issue(t, "api.example.com"), testSecret)
	f, caFile := newStreamFixture(t, o, nil)
	return &grpcFixture{fixture: f, caFile: caFile, port: port}
}

// newStreamFixture is an intercepting fixture (on o.ca, which must be
// set) whose streams' credentials are checked every 20 ms; it returns
// the intercept CA file.
func newStreamFixture(t testing.TB, o fixtureOpts, mutate func(*Config)) (*fixture, string) {
	t.Helper()
	dir := t.TempDir()
	caFile := dir + "/intercept-ca.pem"
	f := newFixtureWith(t, func(c *Config) {
		c.Intercept = InterceptConfig{CAFile: caFile, CAKeyFile: dir + "/intercept-ca.key"}
		c.Limits.StreamCheck = 20 * time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	}, o)
	return f, caFile
}

// issueGRPC mints a handle for the gRPC upstream; dests replace the
// default (the whole upstream, any method).
func (g *grpcFixture) issueGRPC(t testing.TB, intent, inv string, dests ...broker.Destination) string {
	t.Helper()
	return g.issueAt(t, intent, inv, g.port, dests...)
}

// issueAt mints a handle for intent valid for api.example.com:port, or
// for dests when given, for a minute.
func (f *fixture) issueAt(t testing.TB, intent, inv string, port int, dests ...broker.Destination) string {
	t.Helper()
	if len(dests) == 0 {
		dests = []broker.Destination{{Host: "api.example.com", Port: port}}
	}
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: inv, Intent: intent,
		Destinations: dests, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

// grpcClientCmd is a real gRPC client as a plugin runs it.
type grpcClientCmd struct {
	name string
	cmd  func(t *testing.T, target string) *exec.Cmd
}

func grpcClients() []grpcClientCmd {
	return []grpcClientCmd{
		{"grpc-go", func(_ *testing.T, target string) *exec.Cmd {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = []string{"AIRLOCK_TEST_GRPC_TARGET=" + target}
			return c
		}},
		{"grpcio", func(_ *testing.T, target string) *exec.Cmd {
			c := exec.Command(testenv.Python(), "testdata/grpc_client.py", target)
			c.Env = []string{"PYTHONDONTWRITEBYTECODE=1"}
			return c
		}},
		{"grpc-js", func(t *testing.T, target string) *exec.Cmd {
			c := exec.Command("node", "testdata/grpc_client.js", target)
			c.Env = []string{"AIRLOCK_TEST_GRPC_MODULE=" + testenv.NodeModule(t, "@grpc/grpc-js", "1.12.5")}
			return c
		}},
	}
}

// run runs the client's scenario through the proxy with handle in the
// proxy URL and auth as authorization metadata, calling each(r) as
// each result line arrives; it returns the results by call.
func (g *grpcFixture) run(t *testing.T, c grpcClientCmd, target, handle, scenario, auth string, each func(grpcResult)) map[string]grpcResult {
	t.Helper()
	cmd := c.cmd(t, target)
	proxyURL := "http://" + handle + "@" + g.addr
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir(),
		"HTTPS_PROXY="+proxyURL, "https_proxy="+proxyURL, "SSL_CERT_FILE="+g.caFile,
		"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH="+g.caFile, "AIRLOCK_TEST_GRPC_SCENARIO="+scenario)
	if auth != "" {
		cmd.Env = append(cmd.Env, "AIRLOCK_TEST_GRPC_AUTH="+auth)
	}
	results := map[string]grpcResult{}
	runLines(t, cmd, func(line []byte) {
		var r grpcResult
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %q: %v", c.name, line, err)
		}
		results[r.Call] = r
		if each != nil {
			each(r)
		}
	})
	return results
}

// runLines runs cmd and calls each with every line of its output as the
// line arrives; a failed run fails the test with its stderr.
func runLines(t *testing.T, cmd *exec.Cmd, each func([]byte)) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		each(sc.Bytes())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
}

func (g *grpcFixture) target() string { return "api.example.com:" + strconv.Itoa(g.port) }

// Unary, server-, client- and bidirectional streaming calls from
// grpc-go and grpcio through an intercepted tunnel: the credential is
// injected as authorization metadata (by header injection, and by
// substituting the handle the plugin put there), gRPC status and
// trailers come through, and a secret the upstream echoes in a message
// or a trailer is redacted.
func TestGRPCCalls(t *testing.T) {
	g := newGRPCFixture(t)
	for _, c := range grpcClients() {
		// header: the handle in HTTPS_PROXY, the secret injected as
		// authorization; placeholder: the handle also where the secret
		// goes; pass: the plugin pass in HTTPS_PROXY opens the tunnel and
		// each call carries its handle as the placeholder.
		for _, mode := range []struct{ name, intent string }{{"header", "api.write"}, {"placeholder", "api.placeholder"}, {"pass", "api.placeholder"}} {
			t.Run(c.name+"/"+mode.name, func(t *testing.T) {
				h := g.issueGRPC(t, mode.intent, "inv-grpc-"+c.name+mode.name)
				proxyCred, auth := h, ""
				if mode.intent == "api.placeholder" {
					auth = "Bearer " + h
				}
				if mode.name == "pass" {
					iss, err := g.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "pass-grpc-" + c.name, Pass: true,
						Destinations: []broker.Destination{{Host: "api.example.com", Port: g.port}}})
					if err != nil {
						t.Fatal(err)
					}
					proxyCred = iss.Handle
				}
				res := g.run(t, c, g.target(), proxyCred, "all", auth, nil)
				want := map[string][]string{
					"unary": {"unary:hi:true"}, "server": {"s0", "s1", "s2"}, "client": {"client:a,b,c:true"},
				}
				for call, replies := range want {
					r := res[call]
					if r.Code != 0 || strings.Join(r.Replies, "|") != strings.Join(replies, "|") || r.Trailer["x-upstream"] != "done" {
						t.Errorf("%s: got %+v, want replies %q and trailer x-upstream", call, r, replies)
					}
				}
				bidi := res["bidi"]
				// "bidi:docs" ends with the secret's first byte: the
				// guard must not hold it back waiting for more.
				if bidi.Code != 0 || len(bidi.Replies) != 3 || bidi.Replies[0] != "bidi:x" || bidi.Replies[1] != "bidi:docs" {
					t.Fatalf("bidi: got %+v", bidi)
				}
				echo := res["echo"]
				if echo.Code != 0 || len(echo.Replies) != 1 || echo.Trailer["x-echo"] == "" {
					t.Fatalf("echo: got %+v", echo)
				}
				for _, v := range []string{bidi.Replies[2], echo.Replies[0], echo.Trailer["x-echo"]} {
					if strings.Contains(v, testSecret) || !strings.Contains(v, Redaction) {
						t.Errorf("an echoed secret was not redacted: %q", v)
					}
				}
				if f := res["fail"]; f.Code != 5 || f.Message != "no such thing" || f.Trailer["x-upstream"] != "done" {
					t.Errorf("fail: the upstream's status did not come through: %+v", f)
				}
			})
		}
	}
	waitAudit(t, g.fixture, `"path":"/t.T/Bidi"`, `"mode":"intercept"`)
}

// waitAudit waits for an audit line holding every part (lines are
// written when the proxy has finished a response, which may be just
// after the client has read it).
func waitAudit(t *testing.T, f *fixture, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(f.audit.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit line with %q:\n%s", parts, f.audit.String())
		}
	}
}

// What a gRPC call may not do: each refusal reaches the client as a gRPC
// status it can read, naming the Airlock code.
func TestGRPCRefusals(t *testing.T) {
	g := newGRPCFixture(t)
	for _, c := range grpcClients() {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				dests   []broker.Destination
				intent  string
				target  string
				code    int
				refusal string
			}{
				// The CONNECT itself is refused (403 before any TLS):
				// gRPC clients report UNAVAILABLE.
				{name: "undeclared host", target: "other.example.org:" + strconv.Itoa(g.port), code: 14},
				{name: "path", dests: []broker.Destination{{Host: "api.example.com", Port: g.port, PathPrefix: "/t.T/Bidi"}},
					code: 7, refusal: "airlock " + CodeDestination},
				{name: "method", dests: []broker.Destination{{Host: "api.example.com", Port: g.port, Methods: []string{"GET"}}},
					code: 7, refusal: "airlock " + CodeMethodNotDeclared},
				{name: "read-class intent", intent: "api.read", code: 7, refusal: "airlock " + CodeMethodForIntent},
			} {
				t.Run(tc.name, func(t *testing.T) {
					intent := cmpOr(tc.intent, "api.write")
					h := g.issueGRPC(t, intent, "inv-refuse-"+c.name+tc.name, tc.dests...)
					r := g.run(t, c, cmpOr(tc.target, g.target()), h, "unary", "", nil)["unary"]
					if r.Code != tc.code || !strings.HasPrefix(r.Message, tc.refusal) {
						t.Fatalf("got %+v, want code %d and a message starting %q", r, tc.code, tc.refusal)
					}
					if strings.Contains(r.Message, h) {
						t.Fatal("the refusal names the handle")
					}
				})
			}
		})
	}
}

// A handle revoked while a server stream runs ends the stream with
// PERMISSION_DENIED, and the next call on the same connection is refused.
func TestGRPCRevokedMidStream(t *testing.T) {
	g := newGRPCFixture(t)
	for _, c := range grpcClients() {
		t.Run(c.name, func(t *testing.T) {
			inv := "inv-revoke-" + c.name
			h := g.issueGRPC(t, "api.write", inv)
			res := g.run(t, c, g.target(), h, "slow", "", func(r grpcResult) {
				if r.Call == "slow-started" {
					if _, err := g.b.RevokeInvocation(context.Background(), inv); err != nil {
						t.Error(err)
					}
				}
			})
			want := "airlock " + CodeHandleInvalid
			if r := res["slow"]; r.Code != 7 || !strings.HasPrefix(r.Message, want) {
				t.Errorf("slow: got %+v, want PERMISSION_DENIED %q", r, want)
			}
			// The next call is refused: as a stream on the tunnel if it
			// is still open, or at the new CONNECT once the tunnel, whose
			// CONNECT carried the same handle, has gone away (GOAWAY);
			// clients report a refused CONNECT as UNAVAILABLE, each in
			// its own words.
			if r := res["after"]; !(r.Code == 7 && strings.HasPrefix(r.Message, want) || r.Code == 14) {
				t.Errorf("after: got %+v, want a refusal", r)
			}
			if got := res["slow"].Replies; len(got) != 1 || got[0] != "s0" {
				t.Errorf("slow: replies %q, want the one sent before the revocation", got)
			}
			waitAudit(t, g.fixture, `"invocation":"`+inv+`"`, `"path":"/t.T/ServerStream"`, `"code":"`+CodeHandleInvalid+`"`)
		})
	}
}

// A stream in a tunnel opened with the plugin pass ends with
// PERMISSION_DENIED when the pass is revoked, though the call's own
// handle is still live.
func TestGRPCLostPass(t *testing.T) {
	g := newGRPCFixture(t)
	for _, c := range grpcClients() {
		t.Run(c.name, func(t *testing.T) {
			passInv := "pass-lost-" + c.name
			pass, err := g.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: passInv, Pass: true,
				Destinations: []broker.Destination{{Host: "api.example.com", Port: g.port}}})
			if err != nil {
				t.Fatal(err)
			}
			h := g.issueGRPC(t, "api.placeholder", "inv-lost-pass-"+c.name)
			res := g.run(t, c, g.target(), pass.Handle, "slow", "Bearer "+h, func(r grpcResult) {
				if r.Call == "slow-started" {
					if _, err := g.b.RevokeInvocation(context.Background(), passInv); err != nil {
						t.Error(err)
					}
				}
			})
			// The next call ("after") may still find the tunnel open
			// for a check interval, or be refused: no assertion.
			if r := res["slow"]; r.Code != 7 || !strings.HasPrefix(r.Message, "airlock "+CodeHandleInvalid) {
				t.Fatalf("slow: got %+v", r)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
