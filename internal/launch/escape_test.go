package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// levels are the levels the escape suite runs at: the strongest this
// machine allows and Landlock.
func levels(t *testing.T) []sandbox.Level {
	out := sandbox.Detect().Levels()
	if len(out) == 0 {
		t.Fatalf("this machine allows no sandbox level: %s", sandbox.Detect())
	}
	return out
}

// attackers are the malicious plugins: the same attempts in Go and Python.
func attackers(t *testing.T) map[string][]string {
	return map[string][]string{
		"go":     {filepath.Join(attackerDir, "attacker")},
		"python": {testenv.Python(), filepath.Join(attackerDir, "attacker.py")},
	}
}

// airlockFiles lays out what a plugin must never read: a state directory
// with keys, secrets, evidence, storage, another plugin's package and a
// broker socket, and a config file; the operator even grants their
// parent directory read-only, so only the hiding keeps them out.
type airlockFiles struct {
	root, state, config, brokerSock, installDir string
	secrets                                     []string
	accepted                                    chan struct{}
}

func newAirlockFiles(t *testing.T) *airlockFiles {
	root, err := os.MkdirTemp("", "airlock-escape-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	_ = os.Chmod(root, 0o755)
	a := &airlockFiles{root: root, state: filepath.Join(root, "state"), config: filepath.Join(root, "airlock.yaml"),
		accepted: make(chan struct{}, 16)}
	// As deployed: the state directory is its owner's alone.
	if err := os.Mkdir(a.state, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"secrets.yaml", "intercept-ca-key.pem", "evidence-key.pem", "signing-keys.json",
		"evidence.jsonl", "aps.db", "broker-token", "plugins/other/manifest.json"} {
		p := filepath.Join(a.state, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("airlock-secret-"+f), 0o644); err != nil {
			t.Fatal(err)
		}
		a.secrets = append(a.secrets, p)
	}
	if err := os.WriteFile(a.config, []byte("version: v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.secrets = append(a.secrets, a.config)
	a.installDir = filepath.Join(a.state, "plugins", "attacker")
	if err := os.MkdirAll(a.installDir, 0o755); err != nil {
		t.Fatal(err)
	}
	a.brokerSock = filepath.Join(a.state, "broker.sock")
	l, err := net.Listen("unix", a.brokerSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			a.accepted <- struct{}{}
		}
	}()
	return a
}

// fakeProxy stands in for the egress proxy: it answers every request
// "proxied", so the plugin's one way out is seen to work.
func fakeProxy(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "proxied "+r.URL.Host)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// attempts reads what the attacker reports, one attempt a line, until it
// exits.
func attempts(p Runner) map[string]attempt {
	got := map[string]attempt{}
	sc := bufio.NewScanner(p.Stdout())
	for sc.Scan() {
		var at attempt
		if json.Unmarshal(sc.Bytes(), &at) == nil {
			got[at.Attack] = at
		}
	}
	<-p.Exited()
	return got
}

type attempt struct {
	Attack  string `json:"attack"`
	Escaped bool   `json:"escaped"`
	Detail  string `json:"detail"`
}

// TestEscape runs the attacker plugins at each level: every read of an
// Airlock file, write outside the private directory, direct TCP or UDP
// connection, raw socket, look at or signal to the host, and new
// namespace fails; the proxied request succeeds.
func TestEscape(t *testing.T) {
	for _, level := range levels(t) {
		for lang, argv := range attackers(t) {
			t.Run(string(level)+"/"+lang, func(t *testing.T) {
				escape(t, level, argv)
			})
		}
	}
}

func escape(t *testing.T, level sandbox.Level, argv []string) {
	a := newAirlockFiles(t)
	proxy := fakeProxy(t)
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	direct := make(chan struct{}, 8)
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			c.Close()
			direct <- struct{}{}
		}
	}()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	env := []string{
		"ATTACK_READ=" + strings.Join(a.secrets, ","),
		"ATTACK_WRITE=" + strings.Join([]string{filepath.Join(a.installDir, "x"), "/usr/x", "/etc/x", filepath.Join(a.state, "x")}, ","),
		"ATTACK_TCP=" + upstream.Addr().String(),
		"ATTACK_UDP=" + udp.LocalAddr().String(),
		"ATTACK_UNIX=" + a.brokerSock,
		"ATTACK_PID=" + strconv.Itoa(os.Getpid()),
		"ATTACK_PROXIED=http://api.example.com/v1/x",
	}
	if level == sandbox.LevelNamespaces {
		env = append(env, "ATTACK_NS=1")
	}
	if filepath.Base(argv[0]) == "attacker" {
		// The Go attacker runs from its package in the owner-only state
		// directory, as an installed plugin/v1 provider does.
		bin := filepath.Join(a.installDir, "attacker")
		if err := fsutil.CopyFile(argv[0], bin, 0o755); err != nil {
			t.Fatal(err)
		}
		argv = []string{bin}
	}
	cfg := sandbox.Config{Level: level, ReadOnly: []string{a.root, attackerDir}}
	p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: append(argv[1:], "probe"), Env: env,
		InstallDir: a.installDir}, Options{EgressProxy: proxy, Sandbox: cfg, Hide: []string{a.state, a.config}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Level() != level {
		t.Fatalf("level %s, want %s", p.Level(), level)
	}
	got := attempts(p)
	if err := p.Err(); err != nil {
		t.Fatalf("the attacker failed: %v (attempts %v)", err, got)
	}
	// At the landlock level a plugin shares the host's uid and Landlock
	// does not mediate connecting to a unix socket by path: the broker
	// and control APIs admit no caller without their token, which the
	// plugin cannot read (the reads above).
	sockContained := level == sandbox.LevelNamespaces || os.Getuid() == 0
	want := len(a.secrets) + 4 + 1 + 1 + 1 + 1 + 1
	if len(got) < want {
		t.Fatalf("%d attempts reported, want %d: %v", len(got), want, got)
	}
	for name, at := range got {
		switch {
		case name == "proxied":
			if !at.Escaped {
				t.Errorf("the proxied request failed: %s", at.Detail)
			}
		case strings.HasPrefix(name, "unix ") && !sockContained:
		case at.Escaped:
			t.Errorf("ESCAPED: %s (%s)", name, at.Detail)
		}
	}
	for _, at := range []string{"host environ", "signal host", "raw socket", "new user namespace"} {
		if _, ok := got[at]; !ok {
			t.Errorf("attempt %q not made", at)
		}
	}
	select {
	case <-direct:
		t.Error("a direct TCP connection reached the upstream")
	default:
	}
	_ = udp.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, _, err := udp.ReadFrom(make([]byte, 64)); err == nil {
		t.Error("a UDP datagram reached the host")
	}
	if sockContained {
		select {
		case <-a.accepted:
			t.Error("the plugin connected to the broker socket")
		default:
		}
	}
}

// A plugin that leaves a grandchild in its own session holding stdout
// does not stall supervision: the process counts as exited when the
// plugin does, and the grandchild dies with it.
func TestEscapeGrandchild(t *testing.T) {
	for _, level := range levels(t) {
		for lang, argv := range attackers(t) {
			t.Run(string(level)+"/"+lang, func(t *testing.T) {
				p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: append(argv[1:], "grandchild")},
					Options{Sandbox: sandbox.Config{Level: level, ReadOnly: []string{attackerDir}}})
				if err != nil {
					t.Fatal(err)
				}
				go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
				<-p.Exited()
				var ee *exec.ExitError
				if err := p.Err(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
					t.Fatalf("exit: %v", err)
				}
				if pids := marked("airlock-escape-grandchild"); len(pids) > 0 {
					t.Fatalf("the grandchild outlived its plugin: %v", pids)
				}
			})
		}
	}
}

// marked lists live processes whose command line starts with marker.
func marked(marker string) []int {
	return live(func(pid int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && strings.HasPrefix(string(b), marker)
	})
}

// live lists the live processes for which keep is true.
func live(keep func(pid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && keep(pid) && testenv.ProcessAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// A fork bomb and a memory hog are killed whole, for reaching their
// limit, and the exit says which.
func TestEscapeLimits(t *testing.T) {
	for _, level := range levels(t) {
		for lang, argv := range attackers(t) {
			modes := []struct{ mode, limit string }{{"forkbomb", "processes"}, {"memhog", "memory"}}
			if lang == "go" {
				modes = append(modes, struct{ mode, limit string }{"memfd", "memory"}, struct{ mode, limit string }{"memfdinflight", "memory"})
			} else {
				modes = append(modes, struct{ mode, limit string }{"nodump", "memory"})
			}
			for _, tc := range modes {
				t.Run(string(level)+"/"+lang+"/"+tc.mode, func(t *testing.T) {
					cfg := sandbox.Config{Level: level, ReadOnly: []string{attackerDir},
						Limits: sandbox.Limits{Processes: 32, MemoryMB: 96}}
					p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: append(argv[1:], tc.mode)},
						Options{Sandbox: cfg})
					if err != nil {
						t.Fatal(err)
					}
					go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
					<-p.Exited()
					err = p.Err()
					if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tc.limit) {
						t.Fatalf("exit: %v, want the %s limit", err, tc.limit)
					}
				})
			}
		}
	}
}

// A plugin that spreads its processes wide, more children of one thread
// than a page of its children file lists, is still killed at its process
// limit: the watcher counts the children past the first page.
func TestEscapeWideTree(t *testing.T) {
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			argv := attackers(t)["python"]
			cfg := sandbox.Config{Level: level, ReadOnly: []string{attackerDir},
				Limits: sandbox.Limits{Processes: 900, MemoryMB: 2048}}
			p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: append(argv[1:], "wide")},
				Options{Sandbox: cfg})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			<-p.Exited()
			if err := p.Err(); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "processes") {
				t.Fatalf("exit: %v, want the processes limit", err)
			}
		})
	}
}

// A plugin whose processes fork and exit faster than a walk lists them
// neither stalls its init (which would then enforce nothing, forward no
// stop and sweep nothing) nor outlives its sweep: a look ends at the
// process limit, and the sweep stops each process as it finds it.
func TestEscapeChurn(t *testing.T) {
	p, err := Start(context.Background(), Request{Plugin: "attacker", Path: filepath.Join(attackerDir, "attacker"), Args: []string{"churn"}},
		Options{Sandbox: sandbox.Config{Level: sandbox.LevelLandlock, ReadOnly: []string{attackerDir},
			Limits: sandbox.Limits{Processes: 400}}})
	if err != nil {
		t.Fatal(err)
	}
	// The plugin's pid is its process group's, which every lineage
	// keeps.
	sc := bufio.NewScanner(p.Stdout())
	var at attempt
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &at) != nil || at.Attack != "churn" {
		t.Fatalf("the attacker did not start churning: %q", sc.Text())
	}
	plugin, _ := strconv.Atoi(at.Detail)
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	select {
	case <-p.Exited():
	case <-time.After(2 * time.Minute):
		// A hang guard, not a timing: the init is stuck. End what we
		// started: the plugin's process group holds every lineage.
		_ = syscall.Kill(-plugin, syscall.SIGKILL)
		t.Fatal("the init did not end a churning plugin")
	}
	// It exits after a while, unless a look found the limit first.
	if err := p.Err(); err != nil && (!errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "processes")) {
		t.Errorf("exit: %v, want success or the processes limit", err)
	}
	if left := inGroup(plugin); len(left) > 0 {
		_ = syscall.Kill(-plugin, syscall.SIGKILL)
		t.Fatalf("%d processes outlived the sweep", len(left))
	}
}

// inGroup lists the live processes of process group pgid.
func inGroup(pgid int) []int {
	return live(func(pid int) bool {
		g, err := syscall.Getpgid(pid)
		return err == nil && g == pgid
	})
}

// A plugin dies with its init even when the init is killed outright (the
// host's last resort), at every level and whatever uid the plugin runs
// as: a uid change clears the death signal, so the exec stage sets it
// again.
func TestPluginDiesWithItsInit(t *testing.T) {
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			p, err := Start(context.Background(), Request{Plugin: "attacker", Path: filepath.Join(attackerDir, "attacker"), Args: []string{"sleep"}},
				Options{Sandbox: sandbox.Config{Level: level, ReadOnly: []string{attackerDir}}})
			if err != nil {
				t.Fatal(err)
			}
			plugin := testenv.Descendant(t, p.Pid(), "attacker")
			if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.Exited()
			deadline := time.Now().Add(10 * time.Second)
			for testenv.ProcessAlive(plugin) {
				if time.Now().After(deadline) {
					t.Fatal("the plugin outlived its init")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
