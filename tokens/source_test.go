package tokens

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

func TestFileSourceRoundTripAndCAS(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys", "signing.pem")
	src := &FileSource{Path: path}
	a, err := NewRing(ctx, src, RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, err %v; want 0600", st.Mode().Perm(), err)
	}
	b, err := NewRing(ctx, &FileSource{Path: path}, RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if a.Active().ID != b.Active().ID {
		t.Fatal("second ring on the same file made its own key")
	}
	stale, err := src.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := src.Save(ctx, stale); !errors.Is(err, ErrConflict) {
		t.Fatalf("save over a newer file: %v, want ErrConflict", err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Active().ID != b.Active().ID || len(b.Keys()) != 2 {
		t.Fatalf("after rotate+refresh: a=%s b=%s keys=%d", a.Active().ID, b.Active().ID, len(b.Keys()))
	}
}

func TestFileSourceRefusesOpenPermissions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "signing.pem")
	if _, err := NewRing(ctx, &FileSource{Path: path}, RingOptions{Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("created key file: %v %v, want mode 0600", st, err)
	}
	// Group-readable (0640) too: the keys sign tokens every host trusts,
	// and only airlock serve's user reads them.
	for _, mode := range []os.FileMode{0o644, 0o604, 0o620, 0o640, 0o610} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := (&FileSource{Path: path}).Load(ctx)
		if !errors.Is(err, ErrInsecureKeyFile) {
			t.Fatalf("mode %#o: %v, want ErrInsecureKeyFile", mode, err)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&FileSource{Path: path}).Load(ctx); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
}

// A key made by openssl (no Airlock headers) is accepted as the active key.
func TestFileSourceAcceptsOpenSSLKey(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	path := filepath.Join(t.TempDir(), "ed.pem")
	if out, err := exec.Command(openssl, "genpkey", "-algorithm", "ed25519", "-out", path).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v: %s", err, out)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewRing(context.Background(), &FileSource{Path: path}, RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r.Active() == nil || r.Active().Algorithm != EdDSA || len(r.Keys()) != 1 {
		t.Fatalf("active = %+v", r.Active())
	}
}

func TestFileSourceBadContent(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"not PEM", "hello", "no PRIVATE KEY block"},
		{"wrong block", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "want PRIVATE KEY"},
		{"garbage key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "PKCS #8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k.pem")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := (&FileSource{Path: path}).Load(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// Two rings racing to rotate on one source converge on one active key.
func TestConcurrentRotateIfDueConverges(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	src := &MemorySource{}
	opts := RingOptions{Retention: time.Hour, RotateEvery: 2 * time.Hour, Now: clk.Now}
	a, err := NewRing(ctx, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRing(ctx, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	first := a.Active().ID
	clk.Advance(3 * time.Hour)
	done := make(chan error, 2)
	for _, r := range []*Ring{a, b} {
		go func() { _, err := r.RotateIfDue(ctx); done <- err }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Refresh(ctx)
	_ = b.Refresh(ctx)
	if a.Active().ID != b.Active().ID || a.Active().ID == first {
		t.Fatalf("a=%s b=%s first=%s: want one new shared key", a.Active().ID, b.Active().ID, first)
	}
	if n := len(a.Keys()); n != 2 {
		t.Fatalf("ring holds %d keys, want 2 (new + retired within retention)", n)
	}
}

// Signing keys in a directory another local user may write to could be
// theirs (a key they know signs what they like), and one root writes
// there would be given to them: neither is read nor written.
func TestFileSourceRefusesADirectoryOthersMayWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.pem")
	if _, err := NewRing(ctx, &FileSource{Path: path}, RingOptions{Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := (&FileSource{Path: path}).Load(ctx); !errors.Is(err, fsutil.ErrPlanted) {
		t.Fatalf("keys in a directory anyone may write to were read: %v", err)
	}
	fresh := filepath.Join(dir, "new.pem")
	if err := (&FileSource{Path: fresh}).Save(ctx, KeySet{}); !errors.Is(err, fsutil.ErrPlanted) {
		t.Fatalf("keys were written in a directory anyone may write to: %v", err)
	}
	if _, err := os.Lstat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key file was made: %v", err)
	}
}
