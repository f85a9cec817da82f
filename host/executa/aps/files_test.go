package aps

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// newFiles serves a Files on a test listener over a store on a clock
// the test moves.
func newFiles(t *testing.T) (*Files, *testenv.Clock) {
	t.Helper()
	s, clk := openStore(t)
	f := &Files{KV: s, Dir: filepath.Join(t.TempDir(), "blobs")}
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	f.BaseURL = srv.URL
	return f, clk
}

func do(t *testing.T, method, url, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// upload begins, PUTs and completes a file.
func upload(t *testing.T, f *Files, owner, path, body string) File {
	t.Helper()
	up, err := f.Begin(owner, path, "text/plain", int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	code, h, _ := do(t, http.MethodPut, up.URL, body)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	file, err := f.Complete(owner, path, h.Get("ETag"))
	if err != nil {
		t.Fatal(err)
	}
	return file
}

func TestFilesUploadAndDownload(t *testing.T) {
	f, clk := newFiles(t)
	const owner, body = "user/u1", "hello world"
	up, err := f.Begin(owner, "docs/a.txt", "text/plain", int64(len(body)))
	if err != nil || up.Path != "docs/a.txt" || up.ID == "" || !up.ExpiresAt.Equal(clk.Now().Add(DefaultURLTTL)) {
		t.Fatalf("begin: %+v %v", up, err)
	}
	if code, _, _ := do(t, http.MethodPut, strings.Replace(up.URL, "sig=", "sig=x", 1), body); code != http.StatusForbidden {
		t.Fatalf("tampered URL: %d", code)
	}
	if code, _, _ := do(t, http.MethodPut, strings.Replace(up.URL, "a.txt", "b.txt", 1), body); code != http.StatusForbidden {
		t.Fatalf("URL for another path: %d", code)
	}
	if code, _, _ := do(t, http.MethodPut, up.URL, body+"!"); code != http.StatusBadRequest {
		t.Fatalf("wrong size: %d", code)
	}
	if _, err := f.Complete(owner, "docs/a.txt", ""); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("complete before the PUT: %v", err)
	}
	code, h, _ := do(t, http.MethodPut, up.URL, body)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	if _, _, err := f.DownloadURL(owner, "docs/a.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("download before completion: %v", err)
	}
	if _, err := f.Complete(owner, "docs/a.txt", `"0000"`); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("wrong etag: %v", err)
	}
	file, err := f.Complete(owner, "docs/a.txt", "W/"+h.Get("ETag"))
	if err != nil || file.Size != int64(len(body)) || `"`+file.ETag+`"` != h.Get("ETag") {
		t.Fatalf("complete: %+v %v", file, err)
	}
	if u := f.KV.Usage(owner); u != int64(len(body)) {
		t.Fatalf("usage %d", u)
	}
	if code, _, _ := do(t, http.MethodPut, up.URL, body); code != http.StatusConflict {
		t.Fatalf("PUT after completion: %d", code)
	}
	dl, _, err := f.DownloadURL(owner, "docs/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do(t, http.MethodPut, strings.Replace(dl, "/files/download", "/files/upload", 1), "x"); code != http.StatusForbidden {
		t.Fatalf("a download URL used to upload: %d", code)
	}
	code, h, got := do(t, http.MethodGet, dl, "")
	if code != http.StatusOK || got != body || h.Get("Content-Type") != "text/plain" {
		t.Fatalf("download: %d %q %q", code, got, h.Get("Content-Type"))
	}
	if list := f.List(owner, "docs/", 10); len(list) != 1 || list[0] != file {
		t.Fatalf("list: %+v", list)
	}
	// Signed URLs expire on the store's clock.
	clk.Advance(DefaultURLTTL + time.Second)
	if code, _, _ := do(t, http.MethodGet, dl, ""); code != http.StatusForbidden {
		t.Fatalf("expired URL: %d", code)
	}
	if err := f.Delete(owner, "docs/a.txt"); err != nil {
		t.Fatal(err)
	}
	if f.KV.Usage(owner) != 0 || len(f.List(owner, "", 10)) != 0 {
		t.Fatal("a deleted file still counts or lists")
	}
	if err := f.Delete(owner, "docs/a.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestFilesRefusals(t *testing.T) {
	f, _ := newFiles(t)
	f.MaxFile = 8
	f.KV.Quota = 20
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\\b", "a\x00b", strings.Repeat("p", MaxFilePath+1)} {
		if _, err := f.Begin("user/u", p, "", 1); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("path %q: %v", p, err)
		}
	}
	if _, err := f.Begin("user/u", "big", "", 9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the file limit: %v", err)
	}
	// Without a size the PUT is bounded by the file limit.
	up, err := f.Begin("user/u", "unsized", "", -1)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do(t, http.MethodPut, up.URL, "123456789"); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("unsized PUT over the limit: %d", code)
	}
	if code, _, _ := do(t, http.MethodPut, up.URL, "12345678"); code != http.StatusOK {
		t.Fatalf("unsized PUT: %d", code)
	}
	// Files count against the owner's quota with its values.
	upload(t, f, "user/u", "one", "12345678")
	if _, err := f.Begin("user/u", "two", "", 8); !errors.Is(err, ErrQuota) {
		t.Fatalf("past the quota: %v", err)
	}
	if _, _, err := f.DownloadURL("user/u", "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if _, _, err := f.DownloadURL("user/other", "one"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner's file: %v", err)
	}
}

// Uploads begun and never completed are collected after GCAfter, their
// bytes given back and removed; completed files stay.
func TestFilesGC(t *testing.T) {
	f, clk := newFiles(t)
	kept := upload(t, f, "user/u", "kept", "done")
	up, err := f.Begin("user/u", "abandoned", "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do(t, http.MethodPut, up.URL, "abc"); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	if _, err := f.Begin("user/u", "never-put", "", 3); err != nil {
		t.Fatal(err)
	}
	if n := f.GC(); n != 0 {
		t.Fatalf("GC collected %d fresh uploads", n)
	}
	clk.Advance(DefaultUploadGC + time.Second)
	if n := f.GC(); n != 2 {
		t.Fatalf("GC collected %d, want 2", n)
	}
	if u := f.KV.Usage("user/u"); u != kept.Size {
		t.Fatalf("usage %d after GC, want %d", u, kept.Size)
	}
	blobs, _ := os.ReadDir(f.Dir)
	if len(blobs) != 1 {
		t.Fatalf("%d blobs left, want the completed file's", len(blobs))
	}
	if _, _, err := f.DownloadURL("user/u", "kept"); err != nil {
		t.Fatalf("completed file after GC: %v", err)
	}
}

// Run collects until its context ends, and then returns.
func TestFilesRun(t *testing.T) {
	f, clk := newFiles(t)
	if _, err := f.Begin("user/u", "abandoned", "", 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(DefaultUploadGC + time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx, time.Millisecond); close(done) }()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, ok := f.get(filesBucketPrefix+"user/u", "abandoned"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never collected the abandoned upload")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
