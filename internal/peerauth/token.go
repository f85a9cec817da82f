//go:build linux

package peerauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// Token limits.
const (
	// MinTokenLen is the shortest token accepted (a generated one has 43
	// characters: 256 random bits, base64url).
	MinTokenLen = 32
	// maxTokenFile bounds what is read from a token file.
	maxTokenFile = 4 << 10
)

var (
	// ErrInsecureFile: a token or key file others may read (or, for a
	// token shared with a group, that the group may write).
	ErrInsecureFile = errors.New("file is readable by others")
	// ErrBadToken: a token file that holds no usable token.
	ErrBadToken = errors.New("token file holds no usable token")
)

// Token is a bearer token an API requires. Only its digest is kept.
type Token struct {
	sum [sha256.Size]byte
}

// Match reports whether presented is the token, in time independent of
// where (or whether) the two differ.
func (t *Token) Match(presented string) bool {
	if t == nil {
		return false
	}
	sum := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

// NewSecret returns 256 random bits as 43 characters of base64url: a
// token, or a key handed to one process.
func NewSecret() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// NewToken is the Token that secret matches; only its digest is kept.
func NewToken(secret string) *Token {
	return &Token{sum: sha256.Sum256([]byte(secret))}
}

// EnsureToken loads the token at path, creating it when missing: 256
// random bits, mode 0600, or 0640 of group gid when gid is at least 0 (a
// group that shares it). Its directory is created 0700 when missing. An
// existing file is checked as LoadToken does. key names the setting in
// errors ("broker.api.token_file").
func EnsureToken(key, path string, gid int) (*Token, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	// A token in a directory another user may write to, or made, could
	// be theirs (one they know), or be read by them.
	if err := fsutil.CheckPrivateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	t, err := LoadToken(key, path, gid)
	if !errors.Is(err, fs.ErrNotExist) {
		return t, err
	}
	tok := NewSecret()
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o640
	}
	// O_EXCL: two processes starting at once never overwrite each
	// other's token; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadToken(key, path, gid)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	err = func() error {
		if gid >= 0 {
			if err := f.Chown(-1, gid); err != nil {
				return fmt.Errorf("give it to group %d: %w", gid, err)
			}
		}
		if err := f.Chmod(mode); err != nil {
			return err
		}
		if _, err := io.WriteString(f, tok+"\n"); err != nil {
			return err
		}
		return f.Sync()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("%s: create %s: %w", key, path, err)
	}
	return NewToken(tok), nil
}

// LoadToken reads the token an API requires from path. The file must be
// a regular file that others cannot read; the group may read it only when
// it is gid (at least 0: the group configured to share it), and never
// write it. The error wraps fs.ErrNotExist when the file is missing.
func LoadToken(key, path string, gid int) (*Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if err := CheckPrivate(key, path, st, gid); err != nil {
		return nil, err
	}
	tok, err := readToken(key, path, f)
	if err != nil {
		return nil, err
	}
	return NewToken(tok), nil
}

// ReadToken reads a token file as a client does, to present it. The
// content never appears in an error.
func ReadToken(key, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	defer f.Close()
	return readToken(key, path, f)
}

func readToken(key, path string, r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: read %s: %w", key, path, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenFile:
		return "", fmt.Errorf("%w: %s: %s is larger than %d bytes", ErrBadToken, key, path, maxTokenFile)
	case len(tok) < MinTokenLen:
		return "", fmt.Errorf("%w: %s: %s holds fewer than %d characters", ErrBadToken, key, path, MinTokenLen)
	case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }):
		return "", fmt.Errorf("%w: %s: %s must hold one line of printable ASCII", ErrBadToken, key, path)
	}
	return tok, nil
}

// CheckPrivate refuses a secret file (a token or a private key) that is
// not a regular file, that others may read or write, or whose group may
// read it (unless gid is at least 0 and is the file's group) or write it.
// key names the setting in the error.
func CheckPrivate(key, path string, st fs.FileInfo, gid int) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %s is not a regular file", key, path)
	}
	perm := st.Mode().Perm()
	sys, _ := st.Sys().(*syscall.Stat_t)
	groupOK := gid >= 0 && sys != nil && int(sys.Gid) == gid
	switch {
	case perm&0o007 != 0:
		return fmt.Errorf("%w: %s: %s has mode %#o (chmod 600)", ErrInsecureFile, key, path, perm)
	case perm&0o020 != 0:
		return fmt.Errorf("%w: %s: %s has mode %#o: its group may write it (chmod 600)", ErrInsecureFile, key, path, perm)
	case perm&0o040 != 0 && !groupOK:
		return fmt.Errorf("%w: %s: %s has mode %#o: its group may read it (chmod 600)", ErrInsecureFile, key, path, perm)
	}
	return nil
}

// CheckPrivatePath is CheckPrivate on the file at path; a missing file is
// no problem (it is created private when first used).
func CheckPrivatePath(key, path string, gid int) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return CheckPrivate(key, path, st, gid)
}

// LookupGroup resolves a group name or number; "" is NoGroup.
func LookupGroup(name string) (int, error) {
	if name == "" {
		return NoGroup, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return NoGroup, fmt.Errorf("no group %q on this system", name)
	}
	return strconv.Atoi(g.Gid)
}

// LookupUIDs resolves user names or numbers to uids.
func LookupUIDs(names []string) ([]int, error) {
	var uids []int
	var errs []error
	for _, name := range names {
		if n, err := strconv.Atoi(name); err == nil && n >= 0 {
			uids = append(uids, n)
			continue
		}
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("no user %q on this system", name))
			continue
		}
		n, _ := strconv.Atoi(u.Uid)
		uids = append(uids, n)
	}
	return uids, errors.Join(errs...)
}
