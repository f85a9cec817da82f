package aps

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

// Files is object storage whose bytes move over presigned, expiring,
// HMAC-signed URLs that the host itself serves (Handler); the metadata
// lives in the Store, and the bytes count against the owner's quota.
// Uploads never completed are garbage-collected (GC, Run).
type Files struct {
	KV      *Store
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

// Upload is a begun upload: where to PUT the bytes, until when.
type Upload struct {
	URL       string
	ID        string // names this upload_begin, for clients that track it
	Path      string // the clean path
	ExpiresAt time.Time
}

// File is a stored file as a listing or a completed upload shows it.
type File struct {
	Path string
	Size int64
	ETag string // hex SHA-256 of the bytes
}

// Begin starts an upload of owner's path: size is the exact length the
// PUT must have, or -1 when unknown (the PUT is then bounded by MaxFile).
// A size over MaxFile is ErrTooLarge, one past the owner's quota
// ErrQuota, a path that is not relative and clean ErrInvalidPath.
func (f *Files) Begin(owner, path, contentType string, size int64) (Upload, error) {
	f.defaults()
	p, ok := cleanFilePath(path)
	if !ok {
		return Upload{}, ErrInvalidPath
	}
	if size > f.MaxFile {
		return Upload{}, ErrTooLarge
	}
	if f.KV.Usage(owner)+max(size, 0) > f.KV.quota() {
		return Upload{}, ErrQuota
	}
	fb, now := filesBucketPrefix+owner, f.KV.now()
	if err := f.put(fb, p, fileRecord{Size: size, ContentType: contentType, Created: now.Unix()}); err != nil {
		return Upload{}, err
	}
	u, exp := f.signedURL("upload", fb, p, now)
	return Upload{URL: u, ID: uploadID(fb, p, now), Path: p, ExpiresAt: exp}, nil
}

// Complete accepts an upload whose bytes were PUT: etag, when given
// (quoted, weak or bare), must match their SHA-256 (ErrPrecondition, as
// when no bytes were PUT).
func (f *Files) Complete(owner, path, etag string) (File, error) {
	p, ok := cleanFilePath(path)
	if !ok {
		return File{}, ErrInvalidPath
	}
	fb := filesBucketPrefix + owner
	rec, ok := f.get(fb, p)
	if !ok || rec.ETag == "" || etag != "" && normalizeETag(etag) != rec.ETag {
		return File{}, ErrPrecondition
	}
	rec.Complete = true
	if err := f.put(fb, p, rec); err != nil {
		return File{}, err
	}
	return File{Path: p, Size: rec.Size, ETag: rec.ETag}, nil
}

// DownloadURL signs a GET of a completed file (ErrNotFound otherwise).
func (f *Files) DownloadURL(owner, path string) (string, time.Time, error) {
	f.defaults()
	p, ok := cleanFilePath(path)
	if !ok {
		return "", time.Time{}, ErrInvalidPath
	}
	fb := filesBucketPrefix + owner
	if rec, ok := f.get(fb, p); !ok || !rec.Complete {
		return "", time.Time{}, ErrNotFound
	}
	u, exp := f.signedURL("download", fb, p, f.KV.now())
	return u, exp, nil
}

// Delete removes a file, complete or not, and gives its bytes back
// (ErrNotFound when there is none).
func (f *Files) Delete(owner, path string) error {
	p, ok := cleanFilePath(path)
	if !ok {
		return ErrInvalidPath
	}
	fb := filesBucketPrefix + owner
	rec, ok := f.get(fb, p)
	if !ok {
		return ErrNotFound
	}
	err := f.KV.db.Update(func(tx *bolt.Tx) error {
		if rec.ETag != "" {
			_ = f.KV.addUsage(tx, owner, -rec.Size)
		}
		if b := tx.Bucket([]byte(fb)); b != nil {
			return b.Delete([]byte(p))
		}
		return nil
	})
	os.Remove(f.blobPath(fb, p))
	return err
}

// List returns up to limit of owner's completed files under prefix.
func (f *Files) List(owner, prefix string, limit int) []File {
	items := []File{}
	_ = f.KV.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(filesBucketPrefix + owner))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			var rec fileRecord
			if json.Unmarshal(v, &rec) == nil && rec.Complete && len(items) < limit {
				items = append(items, File{Path: string(k), Size: rec.Size, ETag: rec.ETag})
			}
		}
		return nil
	})
	return items
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

// DirectHosts is what a plugin must reach without the egress proxy: the
// host:port of the presigned URLs (the plugin's NO_PROXY). None when f
// is nil (files/* off).
func (f *Files) DirectHosts() []string {
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
