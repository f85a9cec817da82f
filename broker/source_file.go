package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// FileSource reads secrets from one YAML or JSON file mapping a path to
// its fields, for dev and the embedded default:
//
//	demo/api:
//	  token: s3cr3t
//
// The file is refused when its group or others may read it. It is re-read
// whenever it changed, so edits take effect at the next cache miss (or at
// once after SIGHUP or POST /v1/secrets/refresh) without a restart. It has no versions: Version is the number of loads
// that changed the file's content, starting at 1.
type FileSource struct {
	Path string

	mu      sync.Mutex
	data    map[string]map[string]string
	raw     string
	version int
	mtime   time.Time
	size    int64
	mode    os.FileMode
}

// Read implements SecretSource. It re-reads the file when its size or
// modification time changed (reads happen on cache misses only), and
// fails closed if the file became unreadable or too open.
func (f *FileSource) Read(_ context.Context, ref SecretRef) (SecretData, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.Path)
	if err != nil {
		return SecretData{}, fmt.Errorf("%w: secrets file: %v", ErrSecretUnavailable, err)
	}
	if f.data == nil || !st.ModTime().Equal(f.mtime) || st.Size() != f.size || st.Mode() != f.mode {
		if err := f.loadLocked(); err != nil {
			f.data = nil
			return SecretData{}, err
		}
	}
	fields, ok := f.data[ref.Path]
	if !ok {
		return SecretData{}, ErrSecretNotFound
	}
	return SecretData{Fields: fields, Version: f.version}, nil
}

// Reload re-reads the file.
func (f *FileSource) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.loadLocked()
	if err != nil {
		f.data = nil
	}
	return err
}

func (f *FileSource) loadLocked() error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("%w: secrets file: %v", ErrSecretUnavailable, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("%w: secrets file: %v", ErrSecretUnavailable, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: secrets file %s has mode %#o; it must be 0600", ErrSecretUnavailable, f.Path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(fh, 4<<20))
	if err != nil {
		return fmt.Errorf("%w: secrets file: %v", ErrSecretUnavailable, err)
	}
	var data map[string]map[string]string
	if err := yaml.Unmarshal(b, &data); err != nil {
		// yaml errors may quote content: say where, not what.
		return fmt.Errorf("%w: secrets file %s is not a map of path -> field -> string", ErrSecretUnavailable, f.Path)
	}
	if data == nil {
		return errors.Join(ErrSecretUnavailable, errors.New("secrets file is empty"))
	}
	if string(b) != f.raw {
		f.version++
		f.raw = string(b)
	}
	f.data = data
	f.mtime, f.size, f.mode = st.ModTime(), st.Size(), st.Mode()
	return nil
}
