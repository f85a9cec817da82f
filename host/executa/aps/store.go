package aps

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/randid"
)

// DefaultQuota is the storage each scope owner may use (values and files).
const DefaultQuota = 5 << 30

// usageBucket holds bytes used per scope owner.
const usageBucket = "_usage"

// Errors a caller maps to its protocol's codes.
var (
	// ErrPrecondition: an if-match or etag does not match.
	ErrPrecondition = errors.New("precondition failed")
	// ErrQuota: the write would take the owner past the quota; nothing
	// was changed.
	ErrQuota = errors.New("storage quota exceeded")
	// ErrNotFound: no such file (or not completed).
	ErrNotFound = errors.New("not found")
	// ErrInvalidPath: a file path that is not relative, clean and at
	// most MaxFilePath bytes.
	ErrInvalidPath = errors.New("invalid path")
	// ErrTooLarge: a file larger than the file limit.
	ErrTooLarge = errors.New("larger than the file limit")
)

// Store is the embedded key-value store: one bbolt file, so values
// survive restarts. Buckets are per scope owner; each owner may use
// Quota bytes.
type Store struct {
	db *bolt.DB
	// Quota is each owner's limit in bytes (DefaultQuota when zero).
	Quota int64
	// Now is the store's clock (time.Now when nil): values' TTLs, and
	// the files' URL expiry and upload ages.
	Now func() time.Time
}

// Open opens (or creates, 0600) the store file.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("storage %s: %w", path, err)
	}
	// Others who may write it could change what plugins stored.
	if st, err := os.Stat(path); err == nil {
		if err := fsutil.CheckOwnFile(path, st); err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("storage %s is locked by another process (another airlock host or airlock dev on the same state directory?)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// quota is Quota, or DefaultQuota when unset.
func (s *Store) quota() int64 {
	if s.Quota > 0 {
		return s.Quota
	}
	return DefaultQuota
}

// addUsage changes owner's usage by delta, refusing to go over the quota.
func (s *Store) addUsage(tx *bolt.Tx, owner string, delta int64) error {
	b, err := tx.CreateBucketIfNotExists([]byte(usageBucket))
	if err != nil {
		return err
	}
	cur := int64(0)
	if v := b.Get([]byte(owner)); len(v) == 8 {
		cur = int64(binary.BigEndian.Uint64(v))
	}
	next := max(cur+delta, 0)
	if delta > 0 && next > s.quota() {
		return ErrQuota
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(next))
	return b.Put([]byte(owner), buf[:])
}

// Usage returns the bytes a scope owner uses.
func (s *Store) Usage(owner string) int64 {
	var n int64
	_ = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(usageBucket)); b != nil {
			if v := b.Get([]byte(owner)); len(v) == 8 {
				n = int64(binary.BigEndian.Uint64(v))
			}
		}
		return nil
	})
	return n
}

type kvRecord struct {
	Value     json.RawMessage `json:"v"`
	ETag      string          `json:"e"`
	ExpiresAt int64           `json:"x,omitempty"` // unix seconds; 0 = never
}

// Value is a stored value and its etag.
type Value struct {
	Data json.RawMessage
	ETag string
}

// Item is one key of a listing.
type Item struct {
	Key, ETag string
}

func getRecord(tx *bolt.Tx, owner, key string, now time.Time) *kvRecord {
	b := tx.Bucket([]byte(owner))
	if b == nil {
		return nil
	}
	raw := b.Get([]byte(key))
	if raw == nil {
		return nil
	}
	var rec kvRecord
	if json.Unmarshal(raw, &rec) != nil || rec.ExpiresAt != 0 && rec.ExpiresAt <= now.Unix() {
		return nil
	}
	return &rec
}

// Get reads owner's key; an expired key is a miss.
func (s *Store) Get(owner, key string) (Value, bool) {
	var rec *kvRecord
	now := s.now()
	_ = s.db.View(func(tx *bolt.Tx) error {
		rec = getRecord(tx, owner, key, now)
		return nil
	})
	if rec == nil {
		return Value{}, false
	}
	return Value{Data: rec.Value, ETag: rec.ETag}, true
}

// Set writes owner's key and returns its new etag. ttlSeconds, when
// positive, is how long the value lives. ifMatch, when not nil,
// must be the current etag (ErrPrecondition). A write that would take
// the owner past the quota changes nothing (ErrQuota).
func (s *Store) Set(owner, key string, value json.RawMessage, ttlSeconds int64, ifMatch *string) (string, error) {
	now := s.now()
	rec := kvRecord{Value: value, ETag: randid.Hex(8)}
	if ttlSeconds > 0 {
		rec.ExpiresAt = now.Unix() + ttlSeconds
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if ifMatch != nil {
			cur := getRecord(tx, owner, key, now)
			if cur == nil || cur.ETag != *ifMatch {
				return ErrPrecondition
			}
		}
		b, err := tx.CreateBucketIfNotExists([]byte(owner))
		if err != nil {
			return err
		}
		raw, _ := json.Marshal(rec)
		if err := s.addUsage(tx, owner, int64(len(raw)-len(b.Get([]byte(key))))); err != nil {
			return err
		}
		return b.Put([]byte(key), raw)
	})
	if err != nil {
		return "", err
	}
	return rec.ETag, nil
}

// Delete removes owner's key and gives its bytes back; deleted says a
// live (unexpired) value was there.
func (s *Store) Delete(owner, key string) (deleted bool, err error) {
	now := s.now()
	err = s.db.Update(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(owner)); b != nil && b.Get([]byte(key)) != nil {
			deleted = getRecord(tx, owner, key, now) != nil
			if err := s.addUsage(tx, owner, -int64(len(b.Get([]byte(key))))); err != nil {
				return err
			}
			return b.Delete([]byte(key))
		}
		return nil
	})
	return deleted, err
}

// List returns up to limit of owner's live keys with prefix, in order,
// starting after the key after (none: from the first). more says keys
// remain past the last one returned.
func (s *Store) List(owner, prefix, after string, limit int) (items []Item, more bool) {
	now := s.now()
	items = []Item{}
	_ = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(owner))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Seek([]byte(prefix))
		if after != "" {
			k, v = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, v = c.Next()
			}
		}
		for ; k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			var rec kvRecord
			if json.Unmarshal(v, &rec) != nil || rec.ExpiresAt != 0 && rec.ExpiresAt <= now.Unix() {
				continue
			}
			if len(items) == limit {
				more = true
				break
			}
			items = append(items, Item{Key: string(k), ETag: rec.ETag})
		}
		return nil
	})
	return items, more
}
