package main

import (
	"strings"
	"testing"
)

// -h on every command exits 0 and prints a usage that names the command,
// never flag's bare "Usage of …"; version -h does not print the version.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-h"}, {"check-config", "-h"}, {"host", "-h"}, {"invoke", "-h"}, {"plugins", "-h"}, {"dev", "-h"},
		{"explain", "-h"}, {"version", "-h"}, {"token", "mint", "-h"}, {"token", "verify", "-h"}, {"token", "rotate", "-h"},
		{"handle", "issue", "-h"}, {"handle", "inspect", "-h"}, {"handle", "revoke", "-h"}, {"evidence", "verify", "-h"},
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
