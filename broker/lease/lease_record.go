package lease

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// Lease states in a record.
const (
	leaseActive = "active"
	// leaseRevoking: ended, and its revocation at Vault is owed; the
	// record keeps the sealed lease id, so any replica can finish it.
	leaseRevoking = "revoking"
	leaseEnded    = "ended" // revoked (or expired at Vault): no further use
)

// leaseRecord is what the store holds for one invocation's lease of one
// intent. The lease id and the credentials are only in Sealed.
type leaseRecord struct {
	State       string    `json:"state"`
	PluginID    string    `json:"plugin_id,omitempty"`
	Fingerprint string    `json:"fp,omitempty"` // Fingerprint of the id
	Sealed      []byte    `json:"sealed,omitempty"`
	ObtainedAt  time.Time `json:"obtained_at,omitzero"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"` // at Vault; renewals move it
	Deadline    time.Time `json:"deadline,omitzero"`   // when the invocation's handles expire
	Renewable   bool      `json:"renewable,omitempty"`
}

// leaseSecret is the sealed part of a record.
type leaseSecret struct {
	ID   string            `json:"id"`
	Data map[string]string `json:"data"`
}

// fingerprint names a lease in logs, audit lines and evidence: the
// first 8 bytes of the SHA-256 of its id, in hex. A Vault lease id is not
// a credential (it authenticates nothing, and renewing or revoking it
// needs a token with that permission), but it spells the secrets engine's
// mount and role, and whoever holds a token allowed sys/leases/* can end
// or extend the lease with it; so Airlock treats it like a handle: only
// the fingerprint leaves the broker.
func fingerprint(id string) string { return broker.Fingerprint(id) }

// sealer seals the lease secret of a record with AES-256-GCM, bound to
// the record's key.
type sealer struct{ aead cipher.AEAD }

// newSealer reads a 32-byte hex key from file, or makes a random key when
// file is empty (a single process: the memory store).
func newSealer(file string) (*sealer, error) {
	key := make([]byte, 32)
	if file == "" {
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	} else {
		st, err := os.Stat(file)
		if err != nil {
			return nil, fmt.Errorf("broker.leases.seal_key_file: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			// It opens every lease credential in the shared store.
			return nil, fmt.Errorf("broker.leases.seal_key_file: mode %#o lets others read the key; chmod 600 it", st.Mode().Perm())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("broker.leases.seal_key_file: %w", err)
		}
		if key, err = hex.DecodeString(strings.TrimSpace(string(b))); err != nil || len(key) != 32 {
			return nil, errors.New("broker.leases.seal_key_file: must hold 32 bytes in hex (openssl rand -hex 32)")
		}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(key string, ls leaseSecret) ([]byte, error) {
	plain, err := json.Marshal(ls)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plain, []byte(key)), nil
}

func (s *sealer) open(key string, sealed []byte) (leaseSecret, error) {
	var ls leaseSecret
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return ls, errors.New("sealed lease too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(key))
	if err != nil {
		return ls, errors.New("sealed lease does not open with this replica's seal key")
	}
	return ls, json.Unmarshal(plain, &ls)
}

func decodeLease(b []byte) (leaseRecord, error) {
	var r leaseRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("lease record: %w", err)
	}
	return r, nil
}

func encodeLease(r leaseRecord) []byte {
	b, _ := json.Marshal(r) // a struct of plain fields always encodes
	return b
}

// leaseKey is the store key of an invocation's lease of an intent.
// Intent names hold no ':' (see intentName).
func leaseKey(invocationID, intent string) string { return intent + ":" + invocationID }

// State implements LeasedSecrets.
func (l *Manager) State(ctx context.Context, invocationID, intent string) (broker.LeaseState, error) {
	raw, err := l.store.LoadLease(ctx, leaseKey(invocationID, intent))
	if err != nil {
		return broker.LeaseState{}, err
	}
	if raw == nil {
		return broker.LeaseState{State: broker.LeaseStateNone}, nil
	}
	rec, err := decodeLease(raw)
	if err != nil {
		return broker.LeaseState{}, err
	}
	st := broker.LeaseState{Fingerprint: rec.Fingerprint, State: broker.LeaseStateActive, ObtainedAt: rec.ObtainedAt,
		ExpiresAt: rec.ExpiresAt, Renewable: rec.Renewable}
	if rec.State != leaseActive {
		st.State = broker.LeaseStateEnded
	}
	return st, nil
}
