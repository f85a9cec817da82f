package executa

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The file a plugin announces is read and removed only if it is a regular
// file beneath the plugin's directory, reached without following a link:
// the plugin owns the directory and can swap any part of the path (a red
// team had the host delete a file of its choice that way, and stall on a
// FIFO).
func TestReadTransportFile(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	victim := filepath.Join(outside, "evidence.jsonl")
	if err := os.WriteFile(victim, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(os.WriteFile(filepath.Join(dir, "ok.json"), []byte("frame"), 0o600))
	mustDo(os.Symlink(victim, filepath.Join(dir, "link.json")))
	mustDo(os.Symlink(outside, filepath.Join(dir, "d")))
	mustDo(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	mustDo(os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{"regular file", filepath.Join(dir, "ok.json"), true},
		{"symbolic link to a host file", filepath.Join(dir, "link.json"), false},
		{"through a linked directory", filepath.Join(dir, "d", "evidence.jsonl"), false},
		{"dot-dot out", filepath.Join(dir, "..", filepath.Base(outside), "evidence.jsonl"), false},
		{"a FIFO (would block the host)", filepath.Join(dir, "fifo"), false},
		{"a directory", filepath.Join(dir, "sub"), false},
		{"relative", "ok.json", false},
		{"the directory itself", dir, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readTransportFile(dir, tc.path, 1<<20)
			if tc.ok != (err == nil) {
				t.Fatalf("%q: %v", b, err)
			}
			if tc.ok && string(b) != "frame" {
				t.Fatalf("read %q", b)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "ok.json")); !os.IsNotExist(err) {
		t.Errorf("the read file was not removed: %v", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the host file behind a link was touched: %v", err)
	}
}
