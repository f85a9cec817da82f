package proxy

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A CA whose creation failed part-way (the disk filled after the key was
// written, before the certificate) leaves nothing that stops the next
// start: once there is room, the next start creates the CA.
func TestInterceptCACreationOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	mnt := testenv.SmallDisk(t, 64<<10)
	dir := filepath.Join(mnt, "ca")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// One page left: room for the key, not for the certificate too.
	filler := filepath.Join(mnt, "filler")
	testenv.FillDiskLeaving(t, filler, 4096)
	store := fileCAStore{cert: filepath.Join(dir, "ca.pem"), key: filepath.Join(dir, "ca.key")}
	if _, err := openCA(ctx, store, nil); err == nil {
		t.Fatal("the CA was created on a full disk")
	}
	if err := os.Remove(filler); err != nil { // room again
		t.Fatal(err)
	}
	ca, err := openCA(ctx, store, nil)
	if err != nil {
		t.Fatalf("the start after a failed creation: %v", err)
	}
	again, err := openCA(ctx, store, nil)
	if err != nil || !again.cert.Equal(ca.cert) {
		t.Fatalf("a second start: %v", err)
	}
}

// A creation cut short by a crash (kill -9) at any point leaves either
// no CA, created at the next start, or a whole one, used as it is.
func TestInterceptCACreationCutShortByACrash(t *testing.T) {
	ctx := context.Background()
	cert, key, err := newCA(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		files map[string][]byte // what the crash left, by file
		same  bool              // the next start uses the CA written
	}{
		{"after the key", map[string][]byte{"ca.key": key}, false},
		{"after the staged key", map[string][]byte{"ca.key.next": key}, false},
		{"after the certificate", map[string][]byte{"ca.key.next": key, "ca.pem": cert}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			store := fileCAStore{cert: filepath.Join(dir, "ca.pem"), key: filepath.Join(dir, "ca.key")}
			for f, b := range c.files {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ca, err := openCA(ctx, store, nil)
			if c.name == "after the key" {
				// Not a state creation leaves (the key is staged first):
				// a key whose certificate is gone is refused, not replaced.
				if err == nil {
					t.Fatal("a CA key without its certificate was replaced")
				}
				return
			}
			if err != nil {
				t.Fatalf("the start after the crash: %v", err)
			}
			if got := string(ca.state.Bundle) == string(cert); got != c.same {
				t.Fatalf("the CA written before the crash used: %v, want %v", got, c.same)
			}
			again, err := openCA(ctx, store, nil)
			if err != nil || !again.cert.Equal(ca.cert) {
				t.Fatalf("a second start: %v (same CA %v)", err, err == nil && again.cert.Equal(ca.cert))
			}
			if _, err := os.Stat(store.next()); !os.IsNotExist(err) {
				t.Fatalf("the staged key is left: %v", err)
			}
		})
	}
}
