package executa

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/airlock-dev/airlock/internal/serve"
)

// Files limits and defaults.
const (
	DefaultURLTTL     = 10 * time.Minute
	DefaultUploadGC   = time.Hour
	DefaultMaxFile    = 100 << 20
	MaxFilePath       = 512
	filesBucketPrefix = "files/"
)

// Files serves files/*: object storage whose bytes move over presigned,
// expiring, HMAC-signed URLs that the host itself serves; the metadata
// lives in the KV store. Uploads never completed are garbage-collected.
type Files struct {
	KV      *KVStore
	Dir     string // blobs, 0700
	BaseURL string // how plugins reach Handler, e.g. http://127.0.0.1:9466
	Key     []byte // HMAC key; random when empty
	URLTTL  time.Duration
	GCAfter time.Duration
	MaxFile int64

	once sync.Once // fills the defaults on first use
}

type fileRecord struct {
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
	ETag        string `json:"etag,omitempty"`     // sha256 of the bytes, once uploaded
	Complete    bool   `json:"complete,omitempty"` // upload_complete accepted
	Created     int64  `json:"created"`
}

func (f *Files) defaults() { f.once.Do(f.fillDefaults) }

func (f *Files) fillDefaults() {
	if len(f.Key) == 0 {
		f.Key = make([]byte, 32)
		_, _ = rand.Read(f.Key)
	}
	if f.URLTTL == 0 {
		f.URLTTL = DefaultURLTTL
	}
	if f.GCAfter == 0 {
		f.GCAfter = DefaultUploadGC
	}
	if f.MaxFile == 0 {
		f.MaxFile = DefaultMaxFile
	}
}

func cleanFilePath(p string) (string, bool) {
	if p == "" || len(p) > MaxFilePath || strings.ContainsAny(p, "\x00\\") || strings.HasPrefix(p, "/") {
		return "", false
	}
	c := path.Clean(p)
	if c != p || c == "." || strings.HasPrefix(c, "../") || c == ".." {
		return "", false
	}
	return c, true
}

func (f *Files) blobPath(bucket, p string) string {
	sum := sha256.Sum256([]byte(bucket + "\x00" + p))
	return filepath.Join(f.Dir, hex.EncodeToString(sum[:]))
}

func (f *Files) sign(op, bucket, p string, exp int64) string {
	m := hmac.New(sha256.New, f.Key)
	fmt.Fprintf(m, "%s\n%s\n%s\n%d", op, bucket, p, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (f *Files) signedURL(op, bucket, p string, now time.Time) (string, time.Time) {
	exp := now.Add(f.URLTTL)
	q := url.Values{"b": {bucket}, "p": {p}, "exp": {strconv.FormatInt(exp.Unix(), 10)}, "sig": {f.sign(op, bucket, p, exp.Unix())}}
	return strings.TrimSuffix(f.BaseURL, "/") + "/files/" + op + "?" + q.Encode(), exp
}

// call handles files/* for a verified storage scope bucket.
func (f *Files) call(method, bucket string, params json.RawMessage) (any, *RPCError) {
	f.defaults()
	var req struct {
		Path        string `json:"path"`
		ContentType string `json:"content_type"`
		SizeBytes   *int64 `json:"size_bytes"`
		ETag        string `json:"etag"`
		Prefix      string `json:"prefix"`
		Cursor      string `json:"cursor"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, storageErr(CodeStorageInvalid, "params are not a files request", "INVALID_REQUEST")
	}
	fb := filesBucketPrefix + bucket
	now := f.KV.now()
	if method != "files/list" {
		p, ok := cleanFilePath(req.Path)
		if !ok {
			return nil, storageErr(CodeStorageInvalidPath, "path: relative, clean, at most 512 bytes", "INVALID_PATH")
		}
		req.Path = p
	}
	switch method {
	case "files/upload_begin":
		// size_bytes is optional (the SDKs omit it when unknown): the PUT
		// is then bounded by the file limit. Zero is an empty file.
		size := int64(-1)
		if req.SizeBytes != nil {
			size = *req.SizeBytes
			if size < 0 {
				return nil, storageErr(CodeStorageInvalid, "size_bytes: must not be negative", "INVALID_REQUEST")
			}
			if size > f.MaxFile {
				return nil, storageErr(CodeStorageTooLarge, "size_bytes: larger than the file limit", "VALUE_TOO_LARGE")
			}
		}
		if quota := f.KV.quota(); f.KV.Usage(bucket)+max(size, 0) > quota {
			return nil, storageErr(CodeStorageQuota, "storage quota exceeded", "QUOTA_EXCEEDED")
		}
		rec := fileRecord{Size: size, ContentType: req.ContentType, Created: now.Unix()}
		if err := f.put(fb, req.Path, rec); err != nil {
			return nil, storageErr(CodeStorageUpstream, "store write failed", "UPSTREAM_ERROR")
		}
		u, exp := f.signedURL("upload", fb, req.Path, now)
		headers := map[string]string{}
		if req.ContentType != "" {
			headers["Content-Type"] = req.ContentType
		}
		// Every spelling a client reads: upload_url (the notes), put_url
		// and url (the SDKs), with the method and headers to send.
		return map[string]any{"upload_url": u, "put_url": u, "url": u, "method": "PUT", "headers": headers,
			"upload_id": uploadID(fb, req.Path, now), "path": req.Path, "expires_at": exp.UTC().Format(time.RFC3339)}, nil
	case "files/upload_complete":
		rec, ok := f.get(fb, req.Path)
		// The etag is optional (a client may not read the PUT's ETag);
		// when given it must match, quoted or weak forms included.
		if !ok || rec.ETag == "" || req.ETag != "" && normalizeETag(req.ETag) != rec.ETag {
			return nil, storageErr(CodeStoragePrecondition, "etag does not match the uploaded bytes", "PRECONDITION_FAILED")
		}
		rec.Complete = true
		if err := f.put(fb, req.Path, rec); err != nil {
			return nil, storageErr(CodeStorageUpstream, "store write failed", "UPSTREAM_ERROR")
		}
		return map[string]any{"path": req.Path, "etag": rec.ETag, "size": rec.Size}, nil
	case "files/download_url":
		rec, ok := f.get(fb, req.Path)
		if !ok || !rec.Complete {
			return nil, storageErr(CodeStorageNotFound, "no such file", "NOT_FOUND")
		}
		u, exp := f.signedURL("download", fb, req.Path, now)
		return map[string]any{"download_url": u, "get_url": u, "url": u, "expires_at": exp.UTC().Format(time.RFC3339)}, nil
	case "files/delete":
		rec, ok := f.get(fb, req.Path)
		if !ok {
			return nil, storageErr(CodeStorageNotFound, "no such file", "NOT_FOUND")
		}
		_ = f.KV.db.Update(func(tx *bolt.Tx) error {
			if rec.ETag != "" {
				_ = f.KV.addUsage(tx, bucket, -rec.Size)
			}
			if b := tx.Bucket([]byte(fb)); b != nil {
				return b.Delete([]byte(req.Path))
			}
			return nil
		})
		os.Remove(f.blobPath(fb, req.Path))
		return map[string]any{"deleted": true}, nil
	case "files/list":
		items := []map[string]any{}
		_ = f.KV.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(fb))
			if b == nil {
				return nil
			}
			c := b.Cursor()
			for k, v := c.Seek([]byte(req.Prefix)); k != nil && strings.HasPrefix(string(k), req.Prefix); k, v = c.Next() {
				var rec fileRecord
				if json.Unmarshal(v, &rec) == nil && rec.Complete && len(items) < MaxListLimit {
					items = append(items, map[string]any{"path": string(k), "size": rec.Size, "etag": rec.ETag})
				}
			}
			return nil
		})
		return map[string]any{"items": items}, nil
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found"}
}

func (f *Files) put(bucket, p string, rec fileRecord) error {
	return f.KV.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		raw, _ := json.Marshal(rec)
		return b.Put([]byte(p), raw)
	})
}

func (f *Files) get(bucket, p string) (fileRecord, bool) {
	var rec fileRecord
	ok := false
	_ = f.KV.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucket)); b != nil {
			if raw := b.Get([]byte(p)); raw != nil && json.Unmarshal(raw, &rec) == nil {
				ok = true
			}
		}
		return nil
	})
	return rec, ok
}

// Handler serves the presigned URLs: PUT /files/upload and GET
// /files/download. A URL works only before it expires and only for the
// operation, bucket and path it was signed for.
func (f *Files) Handler() http.Handler {
	f.defaults()
	mux := http.NewServeMux()
	check := func(w http.ResponseWriter, r *http.Request, op string) (string, string, bool) {
		q := r.URL.Query()
		b, p := q.Get("b"), q.Get("p")
		exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
		if err != nil || !hmac.Equal([]byte(q.Get("sig")), []byte(f.sign(op, b, p, exp))) {
			http.Error(w, "bad signature", http.StatusForbidden)
			return "", "", false
		}
		if f.KV.now().Unix() > exp {
			http.Error(w, "URL expired", http.StatusForbidden)
			return "", "", false
		}
		return b, p, true
	}
	mux.HandleFunc("PUT /files/upload", func(w http.ResponseWriter, r *http.Request) {
		b, p, ok := check(w, r, "upload")
		if !ok {
			return
		}
		rec, found := f.get(b, p)
		if !found || rec.Complete {
			http.Error(w, "no upload in progress", http.StatusConflict)
			return
		}
		if err := os.MkdirAll(f.Dir, 0o700); err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		tmp, err := os.CreateTemp(f.Dir, ".upload-*")
		if err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		defer os.Remove(tmp.Name())
		h := sha256.New()
		limit := rec.Size
		if limit < 0 {
			limit = f.MaxFile
		}
		n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r.Body, limit+1))
		tmp.Close()
		switch {
		case err != nil:
			http.Error(w, "upload interrupted", http.StatusBadRequest)
			return
		case rec.Size >= 0 && n != rec.Size:
			http.Error(w, "body size differs from size_bytes", http.StatusBadRequest)
			return
		case n > limit:
			http.Error(w, "body larger than the file limit", http.StatusRequestEntityTooLarge)
			return
		}
		rec.Size = n
		if err := os.Rename(tmp.Name(), f.blobPath(b, p)); err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		rec.ETag = hex.EncodeToString(h.Sum(nil))
		if err := f.KV.db.Update(func(tx *bolt.Tx) error {
			return f.KV.addUsage(tx, strings.TrimPrefix(b, filesBucketPrefix), rec.Size)
		}); err != nil {
			os.Remove(f.blobPath(b, p))
			http.Error(w, "storage quota exceeded", http.StatusInsufficientStorage)
			return
		}
		if err := f.put(b, p, rec); err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		w.Header().Set("ETag", `"`+rec.ETag+`"`)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /files/download", func(w http.ResponseWriter, r *http.Request) {
		b, p, ok := check(w, r, "download")
		if !ok {
			return
		}
		rec, found := f.get(b, p)
		if !found || !rec.Complete {
			http.NotFound(w, r)
			return
		}
		if rec.ContentType != "" {
			w.Header().Set("Content-Type", rec.ContentType)
		}
		w.Header().Set("ETag", `"`+rec.ETag+`"`)
		http.ServeFile(w, r, f.blobPath(b, p))
	})
	return mux
}

// GC removes uploads begun more than GCAfter ago and never completed.
func (f *Files) GC() int {
	f.defaults()
	cutoff := f.KV.now().Add(-f.GCAfter).Unix()
	n := 0
	_ = f.KV.db.Update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if !strings.HasPrefix(string(name), filesBucketPrefix) {
				return nil
			}
			var stale [][]byte
			_ = b.ForEach(func(k, v []byte) error {
				var rec fileRecord
				if json.Unmarshal(v, &rec) == nil && !rec.Complete && rec.Created < cutoff {
					stale = append(stale, append([]byte(nil), k...))
					if rec.ETag != "" {
						_ = f.KV.addUsage(tx, strings.TrimPrefix(string(name), filesBucketPrefix), -rec.Size)
					}
				}
				return nil
			})
			for _, k := range stale {
				_ = b.Delete(k)
				os.Remove(f.blobPath(string(name), string(k)))
				n++
			}
			return nil
		})
	})
	return n
}

// Run collects stale uploads every interval until ctx ends.
func (f *Files) Run(ctx context.Context, interval time.Duration) {
	serve.Every(ctx, interval, func(time.Time) { f.GC() })
}

// directHosts is what a plugin must reach without the egress proxy: the
// host:port of the presigned URLs (the plugin's NO_PROXY). None when
// files/* is off.
func (f *Files) directHosts() []string {
	if f == nil {
		return nil
	}
	u, err := url.Parse(f.BaseURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{u.Host}
}

// uploadID names one upload_begin (for clients that track it).
func uploadID(bucket, p string, now time.Time) string {
	sum := sha256.Sum256([]byte(bucket + "\x00" + p + "\x00" + strconv.FormatInt(now.UnixNano(), 10)))
	return hex.EncodeToString(sum[:12])
}

// normalizeETag strips the quotes and weak prefix an HTTP client may keep.
func normalizeETag(s string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(s), "W/"), `"`)
}
