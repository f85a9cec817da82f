//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
	"golang.org/x/sys/unix"
)

func init() { testModes["refused"] = refusedPlugin }

// refusedPlugin makes calls the filter refuses — three UDP sockets, an
// MPTCP one, unshare, ptrace, a fast-open send — and clone3, which it
// answers ENOSYS; prints each errno; and says whether it holds the
// filter's listener (with which it could answer its own calls).
func refusedPlugin() int {
	out := map[string]int{}
	call := func(name string, nr uintptr, args ...uintptr) {
		a := make([]uintptr, 6)
		copy(a, args)
		r, _, e := unix.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 && strings.HasSuffix(name, "socket") {
			unix.Close(int(r))
		}
		out[name] = int(e)
	}
	for i := range 3 {
		call(fmt.Sprintf("udp socket %d", i), unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM)
	}
	call("mptcp socket", unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)
	call("unshare", unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	call("ptrace", unix.SYS_PTRACE, unix.PTRACE_TRACEME)
	call("fast open", unix.SYS_SENDTO, ^uintptr(0), 0, 0, unix.MSG_FASTOPEN)
	call("clone3", unix.SYS_CLONE3, 0, 0)
	listener := false
	for fd := range 1024 {
		if l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && strings.Contains(l, "seccomp") {
			listener = true
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"errno": out, "listener": listener})
	return 0
}

// The host learns what the filter refused: each kind is logged as it
// first happens and counted in the exit report, under the table's
// names and reasons (never the call's arguments); the plugin gets the
// same answers as from the filter alone, and never holds the listener.
func TestSeccompRefusalsReachTheHost(t *testing.T) {
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			var logs testenv.SyncBuffer
			run := runPluginLog(t, level, "refused", slog.New(slog.NewJSONHandler(&logs, nil)))
			if run.code != 0 {
				t.Fatalf("the plugin failed (%d): %s%s", run.code, run.stdout, run.stderr)
			}
			var got struct {
				Errno    map[string]syscall.Errno `json:"errno"`
				Listener bool                     `json:"listener"`
			}
			if err := json.Unmarshal([]byte(run.stdout), &got); err != nil {
				t.Fatalf("%q: %v", run.stdout, err)
			}
			if got.Listener {
				t.Error("the plugin holds the filter's listener")
			}
			for name, e := range got.Errno {
				want := unix.EPERM
				if name == "clone3" {
					want = unix.ENOSYS
				}
				if e != want {
					t.Errorf("%s: %v, want %v", name, e, want)
				}
			}
			socketWhy := ruleNamed(t, "socket").why
			want := map[string]Refusal{
				"socket":  {Call: "socket", Reason: socketWhy, Count: 4},
				"unshare": {Call: "unshare", Reason: ruleNamed(t, "unshare").why, Count: 1},
				"ptrace":  {Call: "ptrace", Reason: ruleNamed(t, "ptrace").why, Count: 1},
				"sendto":  {Call: "sendto", Reason: "MSG_FASTOPEN", Count: 1},
			}
			if len(run.exit.Refused) != len(want) {
				t.Errorf("refused %+v, want %d kinds", run.exit.Refused, len(want))
			}
			for _, r := range run.exit.Refused {
				if r != want[r.Call] {
					t.Errorf("refused %+v, want %+v", r, want[r.Call])
				}
			}
			notices := 0
			for line := range strings.Lines(logs.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] != "the sandbox refused a system call of the plugin" {
					continue
				}
				notices++
				if w, ok := want[fmt.Sprint(rec["call"])]; !ok || rec["reason"] != w.Reason || len(rec) != 5 {
					t.Errorf("notice %v: want the call and the table's reason, nothing else", rec)
				}
			}
			if notices != len(want) {
				t.Errorf("%d notices logged, want one per kind (%d):\n%s", notices, len(want), logs.String())
			}
			t.Logf("%s", logs.String())
		})
	}
}

func ruleNamed(t *testing.T, name string) sysRule {
	for _, r := range seccompRules {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no rule for %s", name)
	return sysRule{}
}

// The table's verdicts in Go (decide, which names refusals to the host)
// and the compiled program agree on every call.
func TestSeccompDecideAgreesWithTheProgram(t *testing.T) {
	filters := compiledFilters(t)
	r := rand.New(rand.NewPCG(0xdec1de, 1))
	for range 20000 {
		goarch, c := fuzzCall(uint8(r.Uint32())&1, uint16(3*r.IntN(len(seccompRules))+1), 0,
			[6]uint64{interesting[r.IntN(len(interesting))], interesting[r.IntN(len(interesting))],
				interesting[r.IntN(len(interesting))], interesting[r.IntN(len(interesting))], r.Uint64(), r.Uint64()})
		got := filters[goarch].eval(t, c)
		var rule sysRule
		for _, ru := range seccompRules {
			if seccompArchs[goarch].nr[ru.name] == c.nr {
				rule = ru
			}
		}
		v, _ := rule.decide(c.args)
		if defaultRets.of(v) != got {
			t.Fatalf("%s %s%v: decide says %s, the program %#x", goarch, rule.name, c.args, v, got)
		}
	}
}

// Refusals are counted by kind, a count taken back when the answer did
// not land, and the first of each kind told once.
func TestRefusalsCountByKind(t *testing.T) {
	var told []Refusal
	r := &refusals{first: func(x Refusal) { told = append(told, x) }}
	a := r.add("socket", "why", 1)
	r.notice(a)
	r.notice(r.add("socket", "why", 1))
	b := r.add("ptrace", "why", 1)
	r.add("ptrace", "why", -1) // interrupted: not answered
	if got := r.list(); len(got) != 1 || got[0] != (Refusal{Call: "socket", Reason: "why", Count: 2}) {
		t.Errorf("list %+v", got)
	}
	r.notice(r.add("ptrace", "why", 1))
	if r.add("ptrace", "why", 0) != b {
		t.Error("the same kind got two entries")
	}
	if len(told) != 2 || told[0].Call != "socket" || told[1].Call != "ptrace" {
		t.Errorf("told %+v, want socket then ptrace, once each", told)
	}
	if (*refusals)(nil).list() != nil {
		t.Error("a nil recorder lists something")
	}
}
