package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// claimHostEnv makes the test binary play a host that claims uids
// (claimHost): DIR|OWNER|FIRST|COUNT.
const claimHostEnv = "AIRLOCK_TEST_CLAIM_HOST"

// claimHost claims a uid for each plugin name read on stdin and prints
// "uid" or "error: …" for each; it exits at the end of stdin, or when
// killed — as a host crashes.
func claimHost(spec string) {
	f := strings.Split(spec, "|")
	first, _ := strconv.Atoi(f[2])
	count, _ := strconv.Atoi(f[3])
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		uid, err := claimUID(f[0], f[1], sc.Text(), UIDRange{First: first, Count: count})
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(uid)
	}
	os.Exit(0)
}

// host is a claimHost process.
type host struct {
	cmd *exec.Cmd
	in  *os.File
	out *bufio.Scanner
}

func startHost(t *testing.T, dir, owner string, r UIDRange) *host {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d|%d", claimHostEnv, dir, owner, r.First, r.Count))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &host{cmd: cmd, in: in.(*os.File), out: bufio.NewScanner(out)}
}

// claim asks the host for plugin name's uid: the uid, or -1 and the
// error's text.
func (h *host) claim(t *testing.T, name string) (int, string) {
	t.Helper()
	if _, err := fmt.Fprintln(h.in, name); err != nil {
		t.Fatal(err)
	}
	if !h.out.Scan() {
		t.Fatalf("the host exited: %v", h.out.Err())
	}
	uid, err := strconv.Atoi(h.out.Text())
	if err != nil {
		return -1, h.out.Text()
	}
	return uid, ""
}

func (h *host) uid(t *testing.T, name string) int {
	t.Helper()
	uid, msg := h.claim(t, name)
	if uid < 0 {
		t.Fatalf("claiming a uid for %s: %s", name, msg)
	}
	return uid
}

// crash kills the host outright: its claims must free themselves.
func (h *host) crash(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
}

// testRange lies outside systemd's dynamic range (no lock of its is
// taken) and, being past 65535, outside what any distribution gives its
// users.
var testRange = UIDRange{First: 700000, Count: 16}

// Two plugins of one host get two uids, the same plugin name on two
// hosts gets two, a second host with the same owner (the same state
// directory, started twice) gets another, and a host restarted after a
// crash gets each plugin's uid back.
func TestUIDClaims(t *testing.T) {
	dir := t.TempDir()
	a := startHost(t, dir, "/var/lib/airlock-a", testRange)
	b := startHost(t, dir, "/var/lib/airlock-b", testRange)
	alpha, beta, other := a.uid(t, "alpha"), a.uid(t, "beta"), b.uid(t, "alpha")
	if alpha == beta || alpha == other || beta == other {
		t.Fatalf("uids alpha %d, beta %d, alpha on another host %d: want three", alpha, beta, other)
	}
	if again := a.uid(t, "alpha"); again != alpha {
		t.Fatalf("the same host asked twice: %d, then %d", alpha, again)
	}
	twin := startHost(t, dir, "/var/lib/airlock-a", testRange)
	if u := twin.uid(t, "alpha"); slices.Contains([]int{alpha, beta, other}, u) {
		t.Fatalf("a second host of the same owner got %d, held by a running one", u)
	}
	for _, u := range []int{alpha, beta, other} {
		if !testRange.Contains(u) {
			t.Fatalf("uid %d outside %+v", u, testRange)
		}
	}
	a.crash(t)
	restarted := startHost(t, dir, "/var/lib/airlock-a", testRange)
	if u := restarted.uid(t, "beta"); u != beta {
		t.Errorf("beta after a restart: uid %d, was %d", u, beta)
	}
	if u := restarted.uid(t, "alpha"); u != alpha {
		t.Errorf("alpha after a restart: uid %d, was %d", u, alpha)
	}
	// The claim names its owner and plugin.
	b2, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(alpha)))
	if err != nil || string(b2) != `{"owner":"/var/lib/airlock-a","plugin":"alpha"}`+"\n" {
		t.Errorf("the claim file holds %q (%v)", b2, err)
	}
}

// A host takes a claim a dead host left only once every uid of the range
// has been claimed once (so that the dead host, back, finds its uids),
// and none that a live host holds.
func TestUIDClaimsWhenTheRangeIsFull(t *testing.T) {
	dir := t.TempDir()
	r := UIDRange{First: 700100, Count: 3}
	dead := startHost(t, dir, "dead", r)
	x, y := dead.uid(t, "p"), dead.uid(t, "q")
	dead.crash(t)
	live := startHost(t, dir, "live", r)
	z := live.uid(t, "s")
	if z == x || z == y {
		t.Fatalf("a new host took the dead host's uid %d while one was never claimed", z)
	}
	got := []int{live.uid(t, "t"), live.uid(t, "u")}
	slices.Sort(got)
	if want := []int{min(x, y), max(x, y)}; !slices.Equal(got, want) {
		t.Fatalf("with the range full, uids %v: want the dead host's free claims %v", got, want)
	}
	if u, msg := live.claim(t, "v"); u >= 0 || !strings.Contains(msg, ErrNoUID.Error()) || !strings.Contains(msg, "host.sandbox.uid_range") {
		t.Fatalf("a fourth plugin in a range of three: uid %d, %q", u, msg)
	}
}

// A uid a user or group of the system has, or a process runs as, is
// never a plugin's.
func TestUIDClaimsSkipWhatTheSystemUses(t *testing.T) {
	r := UIDRange{First: 700200, Count: 8}
	rec := claimRecord{Owner: "owner", Plugin: "p"}
	first := probeOrder(rec, r)[0]
	pw := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(pw, fmt.Appendf(nil, "root:x:0:0::/root:/bin/sh\nsvc:x:%d:%d::/:/bin/false\n", first, first), 0o644); err != nil {
		t.Fatal(err)
	}
	old := passwdFile
	passwdFile = pw
	t.Cleanup(func() { passwdFile = old })
	uid, err := claimUID(t.TempDir(), rec.Owner, rec.Plugin, r)
	if err != nil {
		t.Fatal(err)
	}
	if uid == first {
		t.Fatalf("uid %d is user svc's", uid)
	}
	if err := CheckUIDRange("host.sandbox.uid_range", r); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("1 of its ids belong to users or groups of the system (the first: %d (user svc))", first)) {
		t.Fatalf("CheckUIDRange: %v", err)
	}
	if err := CheckUIDRange("host.sandbox.uid_range", UIDRange{First: 700300, Count: 8}); err != nil {
		t.Fatalf("CheckUIDRange of a free range: %v", err)
	}

	if os.Geteuid() != 0 {
		return // only root starts a process as another uid
	}
	rec = claimRecord{Owner: "owner", Plugin: "running"}
	first = probeOrder(rec, r)[0]
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(first), Gid: uint32(first)}}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	if uid, err := claimUID(t.TempDir(), rec.Owner, rec.Plugin, r); err != nil || uid == first {
		t.Fatalf("uid %d (%v): a process runs as %d", uid, err, first)
	}
}

// Inside systemd's dynamic range a uid systemd holds is skipped, and the
// one taken is locked the way systemd locks its own, so that systemd
// skips it in turn.
func TestUIDClaimsLockSystemdsToo(t *testing.T) {
	sd := t.TempDir()
	old := systemdDir
	systemdDir = sd
	t.Cleanup(func() { systemdDir = old })
	r := UIDRange{First: 65000, Count: 8}
	rec := claimRecord{Owner: "owner", Plugin: "p"}
	first := probeOrder(rec, r)[0]
	held, err := os.OpenFile(filepath.Join(sd, strconv.Itoa(first)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := fsutil.TryLock(held); err != nil {
		t.Fatal(err)
	}
	uid, err := claimUID(t.TempDir(), rec.Owner, rec.Plugin, r)
	if err != nil {
		t.Fatal(err)
	}
	if uid == first {
		t.Fatalf("uid %d is held by systemd", uid)
	}
	f, err := os.Open(filepath.Join(sd, strconv.Itoa(uid)))
	if err != nil {
		t.Fatalf("no systemd lock file for uid %d: %v", uid, err)
	}
	defer f.Close()
	if err := fsutil.TryLock(f); !errors.Is(err, fsutil.ErrLocked) {
		t.Fatalf("systemd's lock on uid %d: %v, want held", uid, err)
	}
}

// The range is validated: no system users, no nobody, no 16-bit -1.
func TestUIDRangeValidate(t *testing.T) {
	for _, tc := range []struct {
		r    UIDRange
		want string
	}{
		{UIDRange{}, ""},
		{UIDRange{First: 100000, Count: 65536}, ""},
		{UIDRange{First: 500, Count: 10}, "host.sandbox.uid_range.first: below 1000"},
		{UIDRange{First: 65530, Count: 10}, "must not hold 65534 (nobody) or 65535"},
		{UIDRange{First: 1 << 31, Count: 10}, "ends past the largest uid"},
		{UIDRange{First: -1}, "host.sandbox.uid_range.first: must be a uid above 0"},
		{UIDRange{Count: 1<<16 + 1}, "host.sandbox.uid_range.count: must be between 1 and 65536"},
	} {
		err := Config{UIDRange: tc.r}.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.want)
		}
	}
}
