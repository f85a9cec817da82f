package executa

import (
	"context"
	"encoding/base64"
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

	"github.com/airlock-dev/airlock/internal/randid"
	"github.com/airlock-dev/airlock/tokens"
)

// Storage (APS) error codes of the notes.
const (
	CodeStorageNotFound     = -32022
	CodeStoragePrecondition = -32023
	CodeStorageQuota        = -32024
	CodeStorageTooLarge     = -32025
	CodeStorageRateLimited  = -32026
	CodeStorageInvalidPath  = -32027
	CodeStorageInvalid      = -32028
)

// Storage limits.
const (
	MaxStorageValue     = 64 << 10
	MaxStorageKey       = 512
	MaxStorageRPCs      = 200
	DefaultListLimit    = 100
	MaxListLimit        = 1000
	DefaultStorageScope = "app"
)

// DefaultQuota is the storage each scope owner may use (values and files).
const DefaultQuota = 5 << 30

// usageBucket holds bytes used per scope bucket.
const usageBucket = "_usage"

// KVStore is the embedded APS key-value store: one bbolt file, so values
// survive restarts. Buckets are per scope owner ("user/<id>",
// "tool/<plugin>", "app/<id>"); each owner may use Quota bytes.
type KVStore struct {
	db    *bolt.DB
	now   func() time.Time
	Quota int64
}

// quota is Quota, or DefaultQuota when unset.
func (s *KVStore) quota() int64 {
	if s.Quota > 0 {
		return s.Quota
	}
	return DefaultQuota
}

// errQuota is returned inside a transaction that would exceed the quota.
var errQuota = errors.New("quota exceeded")

// addUsage changes owner's usage by delta, refusing to go over the quota.
func (s *KVStore) addUsage(tx *bolt.Tx, owner string, delta int64) error {
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
		return errQuota
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(next))
	return b.Put([]byte(owner), buf[:])
}

// Usage returns the bytes a scope owner uses.
func (s *KVStore) Usage(owner string) int64 {
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

// OpenKVStore opens (or creates, 0600) the store file.
func OpenKVStore(path string) (*KVStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("storage %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("storage %s is locked by another process (another airlock host or airlock dev on the same state directory?)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", path, err)
	}
	return &KVStore{db: db, now: time.Now}, nil
}

// Close closes the store.
func (s *KVStore) Close() error { return s.db.Close() }

func newETag() string {
	return randid.Hex(8)
}

func storageErr(code int, msg, name string) *RPCError { return rpcError(code, msg, name) }

// storage handles storage/* after the gate.
func (p *Process) storage(ctx context.Context, inv *liveInvoke, method string, params json.RawMessage) (any, *RPCError) {
	var req struct {
		Key          string          `json:"key"`
		Value        json.RawMessage `json:"value"`
		Scope        string          `json:"scope"`
		TTLSeconds   int64           `json:"ttl_seconds"`
		IfMatch      *string         `json:"if_match"`
		Prefix       string          `json:"prefix"`
		Cursor       string          `json:"cursor"`
		Limit        int             `json:"limit"`
		StorageToken string          `json:"storage_token"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, storageErr(CodeStorageInvalid, "params are not a storage request", "INVALID_REQUEST")
	}
	claims, msg := p.grant(ctx, inv, req.StorageToken, inv.storageToken, "storage", (*tokens.Verifier).VerifyStorage)
	if claims == nil {
		return nil, storageErr(CodeStorageNotGranted, msg, "STORAGE_NOT_GRANTED")
	}
	inv.budget.mu.Lock()
	inv.budget.storage++
	over := inv.budget.storage > MaxStorageRPCs
	inv.budget.mu.Unlock()
	if over {
		return nil, storageErr(CodeStorageRateLimited, "200 storage calls per invoke", "RATE_LIMITED")
	}
	bucket, rerr := scopeBucket(claims, req.Scope)
	if rerr != nil {
		return nil, rerr
	}
	if strings.HasPrefix(method, "files/") {
		if p.opts.Files == nil || p.opts.Files.KV == nil {
			return nil, storageErr(CodeStorageUpstream, "no files service is configured on this host", "UPSTREAM_ERROR")
		}
		return p.opts.Files.call(method, bucket, params)
	}
	if p.opts.KV == nil {
		return nil, storageErr(CodeStorageUpstream, "no storage service is configured on this host", "UPSTREAM_ERROR")
	}
	if method != "storage/list" {
		if req.Key == "" || len(req.Key) > MaxStorageKey || strings.ContainsRune(req.Key, 0) {
			return nil, storageErr(CodeStorageInvalid, "key: 1 to 512 bytes, no NUL", "INVALID_REQUEST")
		}
	}
	s := p.opts.KV
	now := s.now()
	switch method {
	case "storage/get":
		var rec *kvRecord
		_ = s.db.View(func(tx *bolt.Tx) error {
			rec = getRecord(tx, bucket, req.Key, now)
			return nil
		})
		if rec == nil {
			return map[string]any{"value": nil, "exists": false, "etag": nil}, nil
		}
		return map[string]any{"value": rec.Value, "exists": true, "etag": rec.ETag}, nil
	case "storage/set":
		if len(req.Value) == 0 {
			return nil, storageErr(CodeStorageInvalid, "value: required", "INVALID_REQUEST")
		}
		if len(req.Value) > MaxStorageValue {
			return nil, storageErr(CodeStorageTooLarge, "value larger than 64 KB", "VALUE_TOO_LARGE")
		}
		if req.TTLSeconds < 0 {
			return nil, storageErr(CodeStorageInvalid, "ttl_seconds: not negative", "INVALID_REQUEST")
		}
		rec := kvRecord{Value: req.Value, ETag: newETag()}
		if req.TTLSeconds > 0 {
			rec.ExpiresAt = now.Unix() + req.TTLSeconds
		}
		err := s.db.Update(func(tx *bolt.Tx) error {
			if req.IfMatch != nil {
				cur := getRecord(tx, bucket, req.Key, now)
				if cur == nil || cur.ETag != *req.IfMatch {
					return errPrecondition
				}
			}
			b, err := tx.CreateBucketIfNotExists([]byte(bucket))
			if err != nil {
				return err
			}
			raw, _ := json.Marshal(rec)
			if err := s.addUsage(tx, bucket, int64(len(raw)-len(b.Get([]byte(req.Key))))); err != nil {
				return err
			}
			return b.Put([]byte(req.Key), raw)
		})
		if errors.Is(err, errPrecondition) {
			return nil, storageErr(CodeStoragePrecondition, "if_match does not match the current etag", "PRECONDITION_FAILED")
		}
		if errors.Is(err, errQuota) {
			return nil, storageErr(CodeStorageQuota, "storage quota exceeded", "QUOTA_EXCEEDED")
		}
		if err != nil {
			return nil, storageErr(CodeStorageUpstream, "store write failed", "UPSTREAM_ERROR")
		}
		return map[string]any{"etag": rec.ETag}, nil
	case "storage/delete":
		deleted := false
		err := s.db.Update(func(tx *bolt.Tx) error {
			if b := tx.Bucket([]byte(bucket)); b != nil && b.Get([]byte(req.Key)) != nil {
				deleted = getRecord(tx, bucket, req.Key, now) != nil
				if err := s.addUsage(tx, bucket, -int64(len(b.Get([]byte(req.Key))))); err != nil {
					return err
				}
				return b.Delete([]byte(req.Key))
			}
			return nil
		})
		if err != nil {
			return nil, storageErr(CodeStorageUpstream, "store write failed", "UPSTREAM_ERROR")
		}
		return map[string]any{"deleted": deleted}, nil
	case "storage/list":
		limit := req.Limit
		if limit <= 0 {
			limit = DefaultListLimit
		}
		limit = min(limit, MaxListLimit)
		after := ""
		if req.Cursor != "" {
			c, err := base64.RawURLEncoding.DecodeString(req.Cursor)
			if err != nil {
				return nil, storageErr(CodeStorageInvalid, "cursor: not one this service issued", "INVALID_REQUEST")
			}
			after = string(c)
		}
		items := []map[string]string{}
		next := ""
		_ = s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucket))
			if b == nil {
				return nil
			}
			c := b.Cursor()
			k, v := c.Seek([]byte(req.Prefix))
			if after != "" {
				k, v = c.Seek([]byte(after))
				if k != nil && string(k) == after {
					k, v = c.Next()
				}
			}
			for ; k != nil && strings.HasPrefix(string(k), req.Prefix); k, v = c.Next() {
				var rec kvRecord
				if json.Unmarshal(v, &rec) != nil || rec.ExpiresAt != 0 && rec.ExpiresAt <= now.Unix() {
					continue
				}
				if len(items) == limit {
					next = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1]["key"]))
					break
				}
				items = append(items, map[string]string{"key": string(k), "etag": rec.ETag})
			}
			return nil
		})
		out := map[string]any{"items": items}
		if next != "" {
			out["next_cursor"] = next
		}
		return out, nil
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found"}
}

var errPrecondition = errors.New("precondition failed")

func getRecord(tx *bolt.Tx, bucket, key string, now time.Time) *kvRecord {
	b := tx.Bucket([]byte(bucket))
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

// scopeBucket resolves a scope against the token: user and tool are the
// platform constant; app needs the host-attested app claims.
func scopeBucket(c *tokens.Claims, scope string) (string, *RPCError) {
	if scope == "" {
		scope = DefaultStorageScope
	}
	if !c.HasScope(scope) {
		// The scope asked for is the plugin's: named only when it is one
		// the platform knows; the granted ones name the fix.
		asked := "the scope asked for"
		if scope == tokens.ScopeUser || scope == tokens.ScopeTool || scope == tokens.ScopeApp {
			asked = "scope " + scope
		}
		return "", storageErr(CodeStorageNotGranted, asked+" is not granted by the storage token; it grants: "+strings.Join(c.Scopes, ", "),
			"STORAGE_NOT_GRANTED")
	}
	switch scope {
	case tokens.ScopeUser:
		return "user/" + c.UserID, nil
	case tokens.ScopeTool:
		plugin, _, _ := strings.Cut(c.ExecutaToolID, "/")
		return "tool/" + plugin, nil
	case tokens.ScopeApp:
		return "app/" + c.AppID, nil
	}
	return "", storageErr(CodeStorageInvalid, "scope: user, app or tool", "INVALID_REQUEST")
}
