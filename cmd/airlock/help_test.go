package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// -h on every command exits 0 and prints a usage that names the command,
// never flag's bare "Usage of …"; version -h does not print the version.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-h"}, {"check-config", "-h"}, {"host", "-h"}, {"invoke", "-h"}, {"mcp", "-h"}, {"plugins", "-h"}, {"dev", "-h"},
		{"explain", "-h"}, {"version", "-h"}, {"token", "mint", "-h"}, {"token", "verify", "-h"}, {"token", "rotate", "-h"},
		{"handle", "issue", "-h"}, {"handle", "inspect", "-h"}, {"handle", "revoke", "-h"}, {"evidence", "verify", "-h"},
		{"policy", "test", "-h"}, {"policy", "check", "-h"}, {"policy", "-h"},
		{"grants", "-h"}, {"grants", "list", "-h"}, {"grants", "show", "-h"}, {"grants", "issue", "-h"}, {"grants", "revoke", "-h"},
		{"approvals", "-h"}, {"approvals", "list", "-h"}, {"approvals", "show", "-h"}, {"approvals", "approve", "-h"},
		{"approvals", "deny", "-h"},
		{"plugins", "release", "-h"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, code := cli(t, nil, "", args...)
			if code != 0 {
				t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
			}
			all := out + errOut
			if strings.Contains(all, "Usage of") || !strings.Contains(all, "usage") && !strings.Contains(all, "Usage") {
				t.Fatalf("usage text: %q", all)
			}
			if args[0] == "version" && strings.Contains(all, "commit") {
				t.Fatalf("version -h printed the version: %q", all)
			}
		})
	}
	// A bad flag is still a usage error.
	if _, _, code := cli(t, nil, "", "serve", "--no-such-flag"); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}

// check-config --vault on a valid config with no intents says there is
// nothing to read and succeeds: it never prints OK and then fails.
func TestCheckConfigVaultNothingToRead(t *testing.T) {
	out, errOut, code := cli(t, nil, "", "check-config", "--vault")
	if code != 0 || !strings.Contains(out, "nothing to read: no intents configured") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// A closed stdout does not kill airlock with SIGPIPE: the write fails and
// the command ends as it would on any write error (so that `make run |
// tee`, ended with Ctrl-C, still shuts down in order).
func TestClosedStdoutIsNotFatal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads: the first write gets EPIPE
	cmd := exec.Command(airlockBin, "version")
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("version with a closed stdout: %v, want exit 1", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || ws.Signaled() || ws.ExitStatus() != 1 {
		t.Fatalf("version with a closed stdout: %v (killed by a signal?)", err)
	}
}
