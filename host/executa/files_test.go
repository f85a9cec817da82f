package executa

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/aps"
)

func TestFilesService(t *testing.T) {
	f := newFixture(t)
	kv, err := aps.Open(filepath.Join(t.TempDir(), "aps.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	clk := time.Now()
	kv.Now = func() time.Time { return clk }
	files := &aps.Files{KV: kv, Dir: filepath.Join(t.TempDir(), "blobs")}
	srv := httptest.NewServer(files.Handler())
	defer srv.Close()
	files.BaseURL = srv.URL
	p, err := Start(context.Background(), py("files"), Options{Broker: f.b, Secrets: f.b, Tokens: broker.LocalMinter{Issuer: f.issuer}, Verifier: f.verifier,
		EgressProxy: f.proxy, KV: kv, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	user := InvokeRequest{UserID: "u-1"}
	body := "hello world"
	sum := sha256.Sum256([]byte(body))
	etag := hex.EncodeToString(sum[:])

	res := rpcs(t, p, user,
		`{"method":"files/upload_begin","params":{"path":"docs/a.txt","content_type":"text/plain","size_bytes":11,"scope":"user"}}`,
		`{"method":"files/upload_begin","params":{"path":"../etc/passwd","size_bytes":1,"scope":"user"}}`,
		`{"method":"files/upload_begin","params":{"path":"pending.bin","size_bytes":5,"scope":"user"}}`)
	if code(res[0]) != "ok" || code(res[1]) != "-32027 INVALID_PATH" || code(res[2]) != "ok" {
		t.Fatalf("upload_begin: %s %s %s", code(res[0]), code(res[1]), code(res[2]))
	}
	put := func(u, b string) int {
		req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	up := res[0].Result["upload_url"].(string)
	if c := put(strings.Replace(up, "sig=", "sig=x", 1), body); c != http.StatusForbidden {
		t.Fatalf("tampered upload URL: %d", c)
	}
	if c := put(up, "too long a body"); c != http.StatusBadRequest {
		t.Fatalf("wrong size: %d", c)
	}
	if c := put(up, body); c != http.StatusOK {
		t.Fatalf("upload: %d", c)
	}
	res = rpcs(t, p, user,
		`{"method":"files/upload_complete","params":{"path":"docs/a.txt","etag":"wrong","scope":"user"}}`,
		`{"method":"files/upload_complete","params":{"path":"docs/a.txt","etag":"`+etag+`","scope":"user"}}`,
		`{"method":"files/download_url","params":{"path":"docs/a.txt","scope":"user"}}`,
		`{"method":"files/list","params":{"prefix":"","scope":"user"}}`)
	if code(res[0]) != "-32023 PRECONDITION_FAILED" || code(res[1]) != "ok" || code(res[2]) != "ok" {
		t.Fatalf("complete/download: %s %s %s", code(res[0]), code(res[1]), code(res[2]))
	}
	if items := res[3].Result["items"].([]any); len(items) != 1 {
		t.Fatalf("list shows incomplete uploads: %v", items)
	}
	dl := res[2].Result["download_url"].(string)
	resp, err := http.Get(dl)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != body {
		t.Fatalf("download: %q", got)
	}
	// Signed URLs expire.
	clk = clk.Add(aps.DefaultURLTTL + time.Minute)
	resp, err = http.Get(dl)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("expired URL: %d", resp.StatusCode)
	}
	// Uploads never completed are collected.
	clk = clk.Add(2 * time.Hour)
	if n := files.GC(); n != 1 {
		t.Fatalf("GC collected %d, want 1", n)
	}
	res = rpcs(t, p, user,
		`{"method":"files/delete","params":{"path":"docs/a.txt","scope":"user"}}`,
		`{"method":"files/download_url","params":{"path":"docs/a.txt","scope":"user"}}`,
		`{"method":"files/upload_complete","params":{"path":"pending.bin","etag":"x","scope":"user"}}`)
	if code(res[0]) != "ok" || code(res[1]) != "-32022 NOT_FOUND" || code(res[2]) != "-32023 PRECONDITION_FAILED" {
		t.Fatalf("delete/after GC: %s %s %s", code(res[0]), code(res[1]), code(res[2]))
	}
}
