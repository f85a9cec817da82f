package daemon

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// airlock dev as root under umask 077 (or 027) runs the sample provider
// as a uid of its own: the package is laid out as airlock host install
// lays one out, whatever the umask — the plugins directory traversable,
// the package and its files readable, the program executable.
func TestDevDemoPackageWhateverTheUmask(t *testing.T) {
	dir := t.TempDir()
	provider := filepath.Join(t.TempDir(), "tickets-provider")
	if err := os.WriteFile(provider, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	_, err := installDemoProvider(dir, provider, 443)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "plugins", DemoPlugin)
	for path, want := range map[string]os.FileMode{
		filepath.Join(dir, "plugins"):          0o711,
		pkg:                                    0o755,
		filepath.Join(pkg, "tickets-provider"): 0o755,
		filepath.Join(pkg, "manifest.yaml"):    0o644,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %#o", filepath.Base(path), fi.Mode().Perm(), err, want)
		}
	}
}
