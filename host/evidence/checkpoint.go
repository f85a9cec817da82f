package evidence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// CheckpointType is the record type of a signed checkpoint.
const CheckpointType = "evidence.checkpoint"

// Checkpoint is a signed statement of a log's head: the log (its first
// record's id), the seq and hash of its last record, and when. Appended
// to the log periodically and at shutdown, and served at
// GET /v1/evidence/head, it lets a verifier holding the public key tell an
// intact chain from one rewritten whole or truncated.
type Checkpoint struct {
	LogID string    `json:"log_id"`
	Seq   uint64    `json:"seq"`
	Head  string    `json:"head"`
	Time  time.Time `json:"time"`
	KeyID string    `json:"kid"`
	Sig   string    `json:"sig"` // base64url Ed25519 over signingInput
}

func (c Checkpoint) signingInput() []byte {
	return []byte("airlock-evidence-checkpoint/v1\n" + c.LogID + "\n" + strconv.FormatUint(c.Seq, 10) + "\n" + c.Head + "\n" +
		c.Time.UTC().Format(time.RFC3339Nano))
}

// equal says whether c and o are the same checkpoint: every field, the
// signature included (a copied signature over other content is not).
func (c Checkpoint) equal(o Checkpoint) bool {
	return c.LogID == o.LogID && c.Seq == o.Seq && c.Head == o.Head && c.Time.Equal(o.Time) && c.KeyID == o.KeyID && c.Sig == o.Sig
}

func (c Checkpoint) verify(key ed25519.PublicKey) bool {
	sig, err := base64.RawURLEncoding.DecodeString(c.Sig)
	return err == nil && ed25519.Verify(key, c.signingInput(), sig)
}

// Key signs checkpoints. Its public half is published as a JWKS
// (JWKS); the private half stays in a 0600 file of the host.
type Key struct {
	ID   string
	priv ed25519.PrivateKey
}

// LoadKey reads the host's checkpoint key from path, creating it
// (mode 0600) on first use. A key file others can read is refused, and
// so is one in a directory others may write to (fsutil.CheckPrivateDir).
func LoadKey(path string) (*Key, error) {
	// A key in a directory another user may write to, or made, could be
	// theirs: they would sign checkpoints of a trail they rewrote.
	if err := fsutil.CheckPrivateDir(filepath.Dir(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("evidence key: %w", err)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			return nil, gerr
		}
		der, _ := x509.MarshalPKCS8PrivateKey(priv)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("evidence key: %w", err)
		}
		if err := fsutil.CheckPrivateDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("evidence key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("evidence key: %w", err)
		}
		if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
			f.Close()
			return nil, fmt.Errorf("evidence key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("evidence key: %w", err)
		}
		return newKey(priv), nil
	}
	if err != nil {
		return nil, fmt.Errorf("evidence key: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("evidence key %s: readable by others (chmod 600)", path)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("evidence key %s: not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	priv, ok := k.(ed25519.PrivateKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("evidence key %s: not an Ed25519 PKCS #8 key", path)
	}
	return newKey(priv), nil
}

func newKey(priv ed25519.PrivateKey) *Key {
	sum := sha256.Sum256(priv.Public().(ed25519.PublicKey))
	return &Key{ID: base64.RawURLEncoding.EncodeToString(sum[:12]), priv: priv}
}

// JWKS is the public key as a JSON Web Key Set (OKP, Ed25519).
func (k *Key) JWKS() []byte {
	pub := k.priv.Public().(ed25519.PublicKey)
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "OKP", "crv": "Ed25519", "use": "sig",
		"alg": "EdDSA", "kid": k.ID, "x": base64.RawURLEncoding.EncodeToString(pub)}}})
	return b
}

// ParseJWKS reads the Ed25519 keys of a JWKS document by kid.
func ParseJWKS(b []byte) (map[string]ed25519.PublicKey, error) {
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X string } `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, errors.New("JWKS: not a JSON key set")
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize || k.Kid == "" {
			continue
		}
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS: no Ed25519 key")
	}
	return keys, nil
}

// Checkpoint appends a checkpoint signed with key when records were
// appended since the last one, and returns the latest checkpoint (nil
// before the first record). Signing happens here, never per record.
func (l *Log) Checkpoint(key *Key) (*Checkpoint, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.ready(); err != nil {
		return nil, err
	}
	return l.checkpointLocked(key)
}

// checkpointLocked signs the head the file holds: seq and last advance
// only once a record is durably written.
func (l *Log) checkpointLocked(key *Key) (*Checkpoint, error) {
	if l.seq == 0 || l.lastType == CheckpointType {
		return l.lastCheckpoint, nil
	}
	cp := Checkpoint{LogID: l.logID, Seq: l.seq, Head: l.last, Time: l.now().UTC(), KeyID: key.ID}
	cp.Sig = base64.RawURLEncoding.EncodeToString(ed25519.Sign(key.priv, cp.signingInput()))
	data, _ := json.Marshal(cp)
	if _, err := l.write(Record{Type: CheckpointType, Data: data}); err != nil {
		return nil, err
	}
	l.lastCheckpoint = &cp
	return &cp, nil
}

// LatestCheckpoint is the last checkpoint written or found at open.
func (l *Log) LatestCheckpoint() *Checkpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastCheckpoint
}
