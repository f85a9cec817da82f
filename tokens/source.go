package tokens

import (
	"context"
	"strconv"
	"sync"
)

// KeySet is the stored state of a ring: its keys and an opaque version
// used for check-and-set. The zero Version means "nothing stored yet".
type KeySet struct {
	Keys    []*Key
	Version string
}

// KeySource stores a ring's keys. Sources shared by several replicas (a
// file on shared storage, Vault KV v2) let them sign with the same keys.
type KeySource interface {
	// Load returns the stored keys; an empty set when nothing is stored.
	Load(ctx context.Context) (KeySet, error)
	// Save stores set.Keys if the stored version still equals
	// set.Version, and returns ErrConflict otherwise.
	Save(ctx context.Context, set KeySet) error
}

var (
	_ KeySource = (*MemorySource)(nil)
	_ KeySource = (*FileSource)(nil)
	_ KeySource = (*VaultSource)(nil)
)

// MemorySource keeps keys in process memory: for dev and tests. Keys are
// lost on restart, and tokens minted before it stop verifying.
type MemorySource struct {
	mu      sync.Mutex
	keys    []*Key
	version int
}

// Load implements KeySource.
func (m *MemorySource) Load(context.Context) (KeySet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return KeySet{Keys: append([]*Key(nil), m.keys...), Version: m.versionString()}, nil
}

// Save implements KeySource.
func (m *MemorySource) Save(_ context.Context, set KeySet) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set.Version != m.versionString() {
		return ErrConflict
	}
	m.keys = append([]*Key(nil), set.Keys...)
	m.version++
	return nil
}

func (m *MemorySource) versionString() string {
	if m.version == 0 {
		return ""
	}
	return strconv.Itoa(m.version)
}
