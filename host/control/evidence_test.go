package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
)

// fullDisk sends the records of one type to /dev/full (ENOSPC, as on a
// full file system) and the others to the log's file.
type fullDisk struct {
	file, full *os.File
	mu         sync.Mutex
	typ        string
}

func (d *fullDisk) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.typ != "" && bytes.Contains(p, []byte(`"type":"`+d.typ+`"`)) {
		return d.full.Write(p)
	}
	return d.file.Write(p)
}

func (d *fullDisk) Sync() error { return d.file.Sync() }

// A call whose policy decision cannot be recorded is refused, and the
// control API says so: 503 evidence_unavailable.
func TestInvokeAnswersEvidenceUnavailable(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if _, err := full.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("/dev/full write: %v, want ENOSPC", err)
	}
	l, err := evidence.Open(filepath.Join(t.TempDir(), "evidence.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	disk := &fullDisk{full: full}
	l.WrapFile(func(f *os.File) evidence.Writer { disk.file = f; return disk })
	h := host.New(host.Options{Evidence: l, Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	if err := addStub(h, "stub"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(asOperator(control.NewHandler(h)))
	defer srv.Close()
	post := func() (int, map[string]string) {
		body, _ := json.Marshal(control.InvocationRequest{Plugin: "stub", Method: "tool", Input: json.RawMessage(`{}`)})
		resp, err := http.Post(srv.URL+"/v1/invocations", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	// The control: with the disk writable the call runs.
	if code, _ := post(); code != http.StatusOK {
		t.Fatalf("writable disk: status %d", code)
	}
	disk.mu.Lock()
	disk.typ = "policy.decision"
	disk.mu.Unlock()
	if code, e := post(); code != http.StatusServiceUnavailable || e["error"] != "evidence_unavailable" {
		t.Fatalf("control API: %d %v", code, e)
	}
}
