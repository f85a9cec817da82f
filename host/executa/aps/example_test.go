package aps_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/host/executa/aps"
)

// Values are kept per scope owner, with an etag for conditional writes.
func ExampleStore() {
	dir, _ := os.MkdirTemp("", "aps-example-")
	defer os.RemoveAll(dir)
	s, err := aps.Open(filepath.Join(dir, "aps.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	etag, _ := s.Set("user/u-1", "last-summary", json.RawMessage(`"3 open tickets"`), 0, nil)
	v, _ := s.Get("user/u-1", "last-summary")
	fmt.Println(string(v.Data), v.ETag == etag)
	stale := "an older etag"
	_, err = s.Set("user/u-1", "last-summary", json.RawMessage(`"2 open tickets"`), 0, &stale)
	fmt.Println(errors.Is(err, aps.ErrPrecondition))
	// Output:
	// "3 open tickets" true
	// true
}

// A file's bytes move over a presigned URL the host serves: the plugin
// PUTs them, then completes the upload with the ETag it got back.
func ExampleFiles() {
	dir, _ := os.MkdirTemp("", "aps-example-")
	defer os.RemoveAll(dir)
	s, err := aps.Open(filepath.Join(dir, "aps.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	files := &aps.Files{KV: s, Dir: filepath.Join(dir, "blobs")}
	srv := httptest.NewServer(files.Handler())
	defer srv.Close()
	files.BaseURL = srv.URL

	up, _ := files.Begin("user/u-1", "reports/today.txt", "text/plain", 5)
	req, _ := http.NewRequest(http.MethodPut, up.URL, strings.NewReader("hello"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	f, err := files.Complete("user/u-1", "reports/today.txt", resp.Header.Get("ETag"))
	fmt.Println(f.Path, f.Size, err)

	url, _, _ := files.DownloadURL("user/u-1", "reports/today.txt")
	resp, err = http.Get(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	// Output:
	// reports/today.txt 5 <nil>
	// hello
}
