//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// passThrough is the log's own file, watched: it sees whether a write
// reached the disk only in part (a short write).
type passThrough struct {
	*os.File
	mu    sync.Mutex
	short int
}

func (p *passThrough) Write(b []byte) (int, error) {
	n, err := p.File.Write(b)
	if err != nil && n > 0 {
		p.mu.Lock()
		p.short++
		p.mu.Unlock()
	}
	return n, err
}

// The evidence log on a disk that fills up: the appends that do not fit
// are refused and leave nothing in the file (a short write is cut back),
// a checkpoint signs only records on disk, appends go on once space is
// freed, and `airlock evidence verify` passes on the file afterwards,
// with the checkpoint key and the last head.
func TestEvidenceVerifiesAfterAFullDisk(t *testing.T) {
	mnt := testenv.SmallDisk(t, 256<<10)
	dir := t.TempDir()
	key, err := evidence.LoadKey(filepath.Join(dir, "evidence-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, key.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(mnt, "evidence.jsonl")
	l, err := evidence.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var file *passThrough
	l.WrapFile(func(f *os.File) evidence.Writer { file = &passThrough{File: f}; return file })
	data := json.RawMessage(`{"note":"` + strings.Repeat("x", 1000) + `"}`)
	size := func() int64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	written, refused := 0, 0
	appendOne := func() error {
		before := size()
		_, err := l.Append(evidence.Record{Type: "invocation.start", Plugin: "p", Data: data})
		if err != nil {
			refused++
			if after := size(); after != before {
				t.Fatalf("a refused append left %d bytes in the file", after-before)
			}
			return err
		}
		written++
		return nil
	}
	checkpoint := func() *evidence.Checkpoint {
		before := l.LatestCheckpoint()
		cp, err := l.Checkpoint(key)
		if err == nil && cp != before {
			written++
		}
		return cp
	}
	for range 5 {
		if err := appendOne(); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint()
	testenv.FillDisk(t, filepath.Join(mnt, "filler"))
	// Append until the disk refuses, and go on a while: every refusal
	// is cut back, so the next record never follows a torn one.
	for i := 0; refused < 8 && i < 1000; i++ {
		_ = appendOne()
		if refused > 0 && i%3 == 0 {
			checkpoint() // may fit in what is left, or not: either way it signs only what is on disk
		}
	}
	if refused == 0 {
		t.Fatal("the disk never filled")
	}
	if file.short == 0 {
		t.Fatal("no write was short: the test did not cover a record written in part")
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := appendOne(); err != nil {
			t.Fatalf("after space was freed: %v", err)
		}
	}
	cp := checkpoint()
	if cp == nil || cp.Seq != uint64(written-1) {
		t.Fatalf("last checkpoint %+v, want one of %d records", cp, written-1)
	}
	head := filepath.Join(dir, "head.json")
	b, _ := json.Marshal(cp)
	if err := os.WriteFile(head, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := cli(t, nil, "", "evidence", "verify", "--jwks", jwks, "--head", head, p)
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("OK: %d records", written)) {
		t.Fatalf("verify after a full disk (%d written, %d refused): %d %s %s", written, refused, code, out, stderr)
	}
}
