//go:build linux

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NodeModule is the directory of the npm package name at version,
// installed into the tool cache (as tools/check-deploy.sh installs its
// linter) if missing: what a test's Node client loads by path. npm
// must be on PATH.
func NodeModule(tb testing.TB, name, version string) string {
	tb.Helper()
	prefix := filepath.Join(ToolsCache(), "npm")
	mod := filepath.Join(prefix, "node_modules", filepath.FromSlash(name))
	if b, err := os.ReadFile(filepath.Join(mod, "package.json")); err == nil && strings.Contains(string(b), `"version": "`+version+`"`) {
		return mod
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("npm", "install", "--prefix", prefix, "--silent", "--no-audit", "--no-fund", name+"@"+version).CombinedOutput(); err != nil {
		tb.Fatalf("installing %s for a Node client: %v\n%s", name, err, out)
	}
	return mod
}
