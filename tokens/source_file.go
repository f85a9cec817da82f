package tokens

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// PEM headers a FileSource writes on each PRIVATE KEY block. A plain PKCS #8
// PEM file without them (for example from `openssl genpkey -algorithm
// ed25519`) is also accepted: its key is active.
const (
	pemCreated = "Created-At"
	pemRetired = "Retired-At"
)

// FileSource stores keys as PKCS #8 PEM blocks in one file. It refuses a
// file that anyone but its owner may read or write (mode 0600), and
// writes atomically (temporary file, then rename) under an flock, with
// check-and-set on the content's digest.
type FileSource struct {
	Path string
}

// Load implements KeySource.
func (f *FileSource) Load(context.Context) (KeySet, error) {
	data, err := f.read()
	if errors.Is(err, fs.ErrNotExist) {
		return KeySet{}, nil
	}
	if err != nil {
		return KeySet{}, err
	}
	keys, err := parsePEMKeys(data)
	if err != nil {
		return KeySet{}, fmt.Errorf("key file %s: %w", f.Path, err)
	}
	return KeySet{Keys: keys, Version: digest(data)}, nil
}

func (f *FileSource) read() ([]byte, error) {
	// A key in a directory another user may write to, or made, could
	// be theirs: they would sign what they like.
	if err := fsutil.CheckPrivateDir(filepath.Dir(f.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("key directory: %w", err)
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkKeyFileMode(f.Path, st.Mode()); err != nil {
		return nil, err
	}
	return readAllLimited(fh, 1<<20)
}

func checkKeyFileMode(path string, mode fs.FileMode) error {
	if !mode.IsRegular() {
		return fmt.Errorf("key file %s: not a regular file", path)
	}
	// Only the process that signs (airlock serve, and the operator's
	// `airlock token` run as its user) reads the keys: no group, no
	// others.
	if mode.Perm()&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %#o; chmod 600 it (only airlock serve's user may read signing keys)", ErrInsecureKeyFile, path, mode.Perm())
	}
	return nil
}

// Save implements KeySource.
func (f *FileSource) Save(_ context.Context, set KeySet) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create key directory: %w", err)
	}
	if err := fsutil.CheckPrivateDir(dir); err != nil {
		return fmt.Errorf("key directory: %w", err)
	}
	lock, err := fsutil.OpenLockFile(f.Path + ".lock")
	if err != nil {
		return fmt.Errorf("open key file lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock key file: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too

	cur, err := f.read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if set.Version != "" {
			return ErrConflict
		}
	case err != nil:
		return err
	case digest(cur) != set.Version:
		return ErrConflict
	}

	data, err := encodePEMKeys(set.Keys)
	if err != nil {
		return err
	}
	// Atomic, and the file keeps its owner whoever rotates (or the write
	// is refused, naming the user to run as).
	if err := fsutil.WriteFile(f.Path, data, 0o600); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	return nil
}

func parsePEMKeys(data []byte) ([]*Key, error) {
	var keys []*Key
	for n := 0; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("PEM block %d is %q, want PRIVATE KEY (PKCS #8)", n, block.Type)
		}
		created, err := pemTime(block.Headers[pemCreated])
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %s: %w", n, pemCreated, err)
		}
		retired, err := pemTime(block.Headers[pemRetired])
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %s: %w", n, pemRetired, err)
		}
		k, err := parsePKCS8(block.Bytes, created, retired)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PRIVATE KEY block")
	}
	return keys, nil
}

func pemTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, s)
}

func encodePEMKeys(keys []*Key) ([]byte, error) {
	var out []byte
	for _, k := range keys {
		der, err := k.pkcs8()
		if err != nil {
			return nil, fmt.Errorf("encode key %s: %w", k.ID, err)
		}
		h := map[string]string{pemCreated: k.Created.UTC().Format(time.RFC3339)}
		if !k.Retired.IsZero() {
			h[pemRetired] = k.Retired.UTC().Format(time.RFC3339)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: h, Bytes: der})...)
	}
	return out, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
