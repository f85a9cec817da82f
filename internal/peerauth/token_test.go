//go:build linux

package peerauth

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

func TestEnsureTokenCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "api.token")
	tok, err := EnsureToken("api.token_file", path, NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v %v, want 0600", st.Mode().Perm(), err)
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("token directory mode %#o, want 0700", dst.Mode().Perm())
	}
	presented, err := ReadToken("api.token_file", path)
	if err != nil || len(presented) != 43 || !tok.Match(presented) {
		t.Fatalf("read back %d characters, match %v, %v", len(presented), tok.Match(presented), err)
	}
	// A second start keeps the token.
	again, err := EnsureToken("api.token_file", path, NoGroup)
	if err != nil || !again.Match(presented) {
		t.Fatalf("second EnsureToken: %v", err)
	}
	// One bit flipped anywhere, a prefix, an extension: refused.
	for i := range len(presented) {
		b := []byte(presented)
		b[i] ^= 1
		if tok.Match(string(b)) {
			t.Fatalf("bit flipped at %d matched", i)
		}
	}
	for _, p := range []string{"", presented[:42], presented + "A", "Bearer " + presented} {
		if tok.Match(p) {
			t.Fatalf("%d characters matched", len(p))
		}
	}
	var none *Token
	if none.Match(presented) {
		t.Fatal("a nil token matched")
	}
}

// With a shared group the token is created 0640 of that group, and a
// group-readable token is accepted only for that group.
func TestTokenSharedGroup(t *testing.T) {
	gid := os.Getgid()
	path := filepath.Join(t.TempDir(), "api.token")
	if _, err := EnsureToken("api.token_file", path, gid); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %#o, want 0640", st.Mode().Perm())
	}
	if _, err := LoadToken("api.token_file", path, gid); err != nil {
		t.Fatalf("group-readable with its group configured: %v", err)
	}
	if _, err := LoadToken("api.token_file", path, NoGroup); !errors.Is(err, ErrInsecureFile) {
		t.Fatalf("group-readable without a group configured: %v", err)
	}
}

// A token or key file others may read, or its group when no group shares
// it, is refused; the message names the setting and the mode, never the
// content.
func TestLoadTokenRefusesOpenModes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.token")
	if _, err := EnsureToken("api.token_file", path, NoGroup); err != nil {
		t.Fatal(err)
	}
	content, _ := os.ReadFile(path)
	for _, mode := range []os.FileMode{0o604, 0o640, 0o620, 0o602, 0o644, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadToken("api.token_file", path, NoGroup)
		if !errors.Is(err, ErrInsecureFile) || !strings.Contains(err.Error(), "api.token_file") ||
			strings.Contains(err.Error(), strings.TrimSpace(string(content))) {
			t.Fatalf("mode %#o: %v", mode, err)
		}
		if err := CheckPrivatePath("api.token_file", path, NoGroup); !errors.Is(err, ErrInsecureFile) {
			t.Fatalf("CheckPrivatePath mode %#o: %v", mode, err)
		}
		// Creating never replaces a file it refuses.
		if _, err := EnsureToken("api.token_file", path, NoGroup); !errors.Is(err, ErrInsecureFile) {
			t.Fatalf("EnsureToken over mode %#o: %v", mode, err)
		}
	}
	if err := CheckPrivatePath("k", filepath.Join(t.TempDir(), "missing"), NoGroup); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
}

func TestReadTokenRefusesBadContent(t *testing.T) {
	for _, c := range []struct{ name, content string }{
		{"empty", ""},
		{"short", strings.Repeat("a", MinTokenLen-1) + "\n"},
		{"two lines", strings.Repeat("a", 40) + "\n" + strings.Repeat("b", 40)},
		{"control character", strings.Repeat("a", 40) + "\x00"},
		{"too large", strings.Repeat("a", maxTokenFile+1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t")
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadToken("k", path); !errors.Is(err, ErrBadToken) {
				t.Fatalf("%v, want ErrBadToken", err)
			}
			if _, err := LoadToken("k", path, NoGroup); !errors.Is(err, ErrBadToken) {
				t.Fatalf("LoadToken: %v, want ErrBadToken", err)
			}
		})
	}
	if _, err := ReadToken("k", filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "k:") {
		t.Fatalf("missing: %v", err)
	}
}

func TestLookup(t *testing.T) {
	if g, err := LookupGroup(""); err != nil || g != NoGroup {
		t.Fatalf("empty group: %d %v", g, err)
	}
	if g, err := LookupGroup("4242"); err != nil || g != 4242 {
		t.Fatalf("numeric group: %d %v", g, err)
	}
	if _, err := LookupGroup("no-such-group-airlock"); err == nil {
		t.Fatal("an unknown group resolved")
	}
	uids, err := LookupUIDs([]string{"root", "4242"})
	if err != nil || len(uids) != 2 || uids[0] != 0 || uids[1] != 4242 {
		t.Fatalf("%v %v", uids, err)
	}
	if _, err := LookupUIDs([]string{"no-such-user-airlock"}); err == nil {
		t.Fatal("an unknown user resolved")
	}
}

// A secret is 256 random bits in 43 characters, new each time; the Token
// made from it matches it and nothing else.
func TestNewSecretAndToken(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if len(a) != 43 || a == b {
		t.Fatalf("secrets of %d characters, equal: %v", len(a), a == b)
	}
	tok := NewToken(a)
	if !tok.Match(a) || tok.Match(b) || tok.Match(a[:42]) {
		t.Fatal("NewToken matches the wrong secrets")
	}
}

// A token in a directory another local user may write to could be one
// they put there (and know), or be read by them: nothing is read or made
// there.
func TestEnsureTokenRefusesADirectoryOthersMayWrite(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.token")
	if _, err := EnsureToken("api.token_file", path, NoGroup); !errors.Is(err, fsutil.ErrPlanted) || !strings.HasPrefix(err.Error(), "api.token_file: ") {
		t.Fatalf("EnsureToken in a directory anyone may write to: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a token was made: %v", err)
	}
}
