//go:build linux

package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/internal/randid"
)

// VaultVersion is the Vault release `make tools` builds.
const VaultVersion = "v1.19.0"

// RequireEnv makes a missing service binary fail tests instead of skipping them.
const RequireEnv = "AIRLOCK_REQUIRE_SERVICES"

// ToolsCache is where `make tools` puts binaries it builds.
func ToolsCache() string {
	if d := os.Getenv("AIRLOCK_TOOLS_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "airlock-tools")
}

// findBinary returns the first executable of env var, PATH name, cached path.
func findBinary(envVar, name, cached string) (string, bool) {
	if p := os.Getenv(envVar); p != "" {
		if isExecutable(p) {
			return p, true
		}
		return "", false
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	if cached != "" && isExecutable(cached) {
		return cached, true
	}
	return "", false
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// Missing skips the test for a missing tool, or fails it when
// AIRLOCK_REQUIRE_SERVICES=1 (as under `make test`).
func Missing(tb testing.TB, what string) {
	tb.Helper()
	missing(tb, what)
}

// missing skips or fails the test for a missing binary.
func missing(tb testing.TB, what string) {
	tb.Helper()
	msg := what + " not found: run `make tools` (or set its *_BIN variable)"
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

func randomToken(prefix string) string {
	return prefix + randid.Hex(16)
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Python is the interpreter tests run Python plugins with: the system's
// /usr/bin/python3, which a sandboxed plugin sees (an interpreter under a
// home directory needs a host.sandbox.read_only grant), else the first
// python3 on PATH.
func Python() string {
	if isExecutable("/usr/bin/python3") {
		return "/usr/bin/python3"
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	return "python3"
}

// NeedsRoot skips a test that needs root outside `make test`, and fails
// it there (AIRLOCK_REQUIRE_SERVICES=1): CI runs the tests as root, so a
// skip there would stand in for a case that was never checked.
func NeedsRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatal("needs root: " + why)
	}
	tb.Skip("needs root: " + why)
}
