package evidence

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// faultyFile is a log's file whose next write can be short (half the
// line reaches the file, then ENOSPC), whose syncs can fail, and whose
// cut-back can fail: a full or failing disk, chosen by the test.
type faultyFile struct {
	f                        *os.File
	mu                       sync.Mutex
	short, syncErr, truncErr bool
	// truncLies makes a cut-back report success and cut nothing: the
	// log then goes on as the host before this release did, after the
	// remains of a failed write.
	truncLies bool
	writes    int
}

func (w *faultyFile) set(short, syncErr, truncErr bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.short, w.syncErr, w.truncErr = short, syncErr, truncErr
}

func (w *faultyFile) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if w.short {
		n, _ := w.f.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return w.f.Write(p)
}

func (w *faultyFile) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.syncErr {
		return syscall.EIO
	}
	return w.f.Sync()
}

func (w *faultyFile) Truncate(size int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.truncErr {
		return syscall.EIO
	}
	if w.truncLies {
		return nil
	}
	return w.f.Truncate(size)
}

func faultyLog(t *testing.T) (*Log, *faultyFile, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var w *faultyFile
	l.WrapFile(func(f *os.File) Writer { w = &faultyFile{f: f}; return w })
	return l, w, p
}

func verifyFile(t *testing.T, p string, opts VerifyOptions) Verified {
	t.Helper()
	v, err := VerifyFiles([]string{p}, opts)
	if err != nil {
		t.Fatalf("%s does not verify: %v", filepath.Base(p), err)
	}
	return v
}

// A write that fails part-way (a short write, as on a full disk) or whose
// sync fails is cut back to the last whole record: the chain is not
// advanced for it, the next record follows the last whole one, and the
// file verifies; a checkpoint signs only what is on disk.
func TestFailedWriteIsCutBack(t *testing.T) {
	for _, tt := range []struct {
		name           string
		short, syncErr bool
	}{
		{"short write", true, false},
		{"failed sync", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, w, p := faultyLog(t)
			key := testKey(t)
			for i := 0; i < 3; i++ {
				if _, err := l.Append(Record{Type: "policy.decision"}); err != nil {
					t.Fatal(err)
				}
			}
			head := l.Head()
			w.set(tt.short, tt.syncErr, false)
			if _, err := l.Append(Record{Type: "invocation.start", Data: json.RawMessage(`{"x":"` + strings.Repeat("y", 400) + `"}`)}); err == nil {
				t.Fatal("a failed write was reported written")
			}
			if _, err := l.Checkpoint(key); err == nil {
				t.Fatal("a checkpoint was reported written on a failing disk")
			}
			if l.Head() != head || l.LatestCheckpoint() != nil {
				t.Fatal("the chain advanced over a record that is not on disk")
			}
			verifyFile(t, p, VerifyOptions{HeadHash: head})
			w.set(false, false, false)
			r, err := l.Append(Record{Type: "invocation.start"})
			if err != nil || r.Seq != 4 || r.Prev != head {
				t.Fatalf("after the disk recovered: %+v %v", r, err)
			}
			cp, err := l.Checkpoint(key)
			if err != nil || cp.Seq != 4 || cp.Head != r.Hash {
				t.Fatalf("checkpoint after recovery: %+v %v", cp, err)
			}
			keys, _ := ParseJWKS(key.JWKS())
			if v := verifyFile(t, p, VerifyOptions{Keys: keys, Head: cp}); v.Records != 5 || v.Unsigned != 0 {
				t.Fatalf("verified %+v", v)
			}
		})
	}
}

// When the cut-back fails too, the log takes no record (ErrTorn), not
// even a checkpoint, until the cut succeeds; the next record after it
// follows the last whole one.
func TestUncutWriteClosesTheLog(t *testing.T) {
	l, w, p := faultyLog(t)
	key := testKey(t)
	if _, err := l.Append(Record{Type: "policy.decision"}); err != nil {
		t.Fatal(err)
	}
	head := l.Head()
	w.set(true, false, true)
	if _, err := l.Append(Record{Type: "invocation.start"}); !errors.Is(err, ErrTorn) {
		t.Fatalf("uncut write: %v, want ErrTorn", err)
	}
	// The disk takes writes again, but the torn bytes are still there.
	w.set(false, false, true)
	writes := w.writes
	if _, err := l.Append(Record{Type: "invocation.start"}); !errors.Is(err, ErrTorn) {
		t.Fatalf("append on a torn log: %v, want ErrTorn", err)
	}
	if _, err := l.Checkpoint(key); !errors.Is(err, ErrTorn) {
		t.Fatalf("checkpoint on a torn log: %v, want ErrTorn", err)
	}
	if w.writes != writes || l.Head() != head {
		t.Fatal("a torn log was written to")
	}
	w.set(false, false, false)
	r, err := l.Append(Record{Type: "invocation.start"})
	if err != nil || r.Seq != 2 || r.Prev != head {
		t.Fatalf("after the cut succeeded: %+v %v", r, err)
	}
	verifyFile(t, p, VerifyOptions{HeadHash: r.Hash})
}

// A log left with a torn tail (the host stopped while its cut-back
// failed, or crashed mid-write) is refused at Open with the way out;
// Repair cuts the tail back to the last whole record and records the
// cut, after which the log opens and verifies.
func TestRepairTornTail(t *testing.T) {
	p, _ := writeLog(t, 3)
	torn := `{"seq":4,"id":"ev-0123`
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(torn)
	f.Close()
	if _, err := Open(p); !errors.Is(err, ErrTornTail) || !strings.Contains(err.Error(), "airlock evidence repair") {
		t.Fatalf("open of a torn log: %v", err)
	}
	res, err := Repair(p)
	if err != nil || res.CutBytes != int64(len(torn)) || res.Record.Type != RepairType || res.Record.Seq != 4 {
		t.Fatalf("repair: %+v %v", res, err)
	}
	if !strings.Contains(string(res.Record.Data), `"cut_bytes":22`) {
		t.Fatalf("the repair record does not say what was cut: %s", res.Record.Data)
	}
	v := verifyFile(t, p, VerifyOptions{})
	if v.Records != 4 {
		t.Fatalf("after repair: %+v", v)
	}
	l, err := Open(p)
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	if r, err := l.Append(Record{Type: "lifecycle.launch"}); err != nil || r.Seq != 5 {
		t.Fatalf("append after repair: %+v %v", r, err)
	}
	// While the log is held, Repair refuses.
	if _, err := Repair(p); !errors.Is(err, ErrInUse) {
		t.Fatalf("repair of a held log: %v", err)
	}
	l.Close()
	// A verifying log is left alone.
	if res, err := Repair(p); err != nil || res.CutBytes != 0 {
		t.Fatalf("repair of a whole log: %+v %v", res, err)
	}
	// A break inside the chain is not repaired.
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `"seq":2`, `"seq":9`, 1)), 0o600)
	if _, err := Repair(p); !errors.Is(err, ErrNotRepairable) {
		t.Fatalf("repair of a tampered log: %v", err)
	}
}

func testKey(t *testing.T) *Key {
	t.Helper()
	k, err := LoadKey(filepath.Join(t.TempDir(), "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A log damaged by a host before this release, which left the part of a
// failed record on the line and wrote the next record after it: Repair
// cuts those remains out, keeping every record and checkpoint, and
// records what it cut; the log then verifies against its key and head.
func TestRepairRemainsOfOldFailedWrites(t *testing.T) {
	l, w, p := faultyLog(t)
	key := testKey(t)
	keys, _ := ParseJWKS(key.JWKS())
	big := Record{Type: "invocation.start", Data: json.RawMessage(`{"x":"` + strings.Repeat("y", 300) + `"}`)}
	appendN(t, l, 2)
	if _, err := l.Checkpoint(key); err != nil {
		t.Fatal(err)
	}
	fail := func(n int) int64 {
		st, _ := os.Stat(p)
		w.mu.Lock()
		w.short, w.truncLies = true, true
		w.mu.Unlock()
		for range n {
			if _, err := l.Append(big); err == nil {
				t.Fatal("a short write was reported written")
			}
		}
		w.set(false, false, false)
		w.mu.Lock()
		w.truncLies = false
		w.mu.Unlock()
		after, _ := os.Stat(p)
		return after.Size() - st.Size()
	}
	cut := fail(2) // two remains of record 4 in front of it
	appendN(t, l, 2)
	if _, err := l.Checkpoint(key); err != nil {
		t.Fatal(err)
	}
	cut += fail(1) // one remain of record 7
	r, err := l.Append(big)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := l.Checkpoint(key)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := VerifyFiles([]string{p}, VerifyOptions{}); err == nil {
		t.Fatal("the damaged log verifies: the test damaged nothing")
	}
	res, err := Repair(p)
	if err != nil || res.CutBytes != cut || res.Record.Seq != cp.Seq+2 {
		t.Fatalf("repair: %+v %v (want %d bytes cut)", res, err, cut)
	}
	var d repairData
	json.Unmarshal(res.Record.Data, &d)
	if len(d.Before) != 2 || d.Before[0] != 4 || d.Before[1] != r.Seq || len(d.CutSHA256) != 64 {
		t.Fatalf("the repair record: %s", res.Record.Data)
	}
	if v := verifyFile(t, p, VerifyOptions{Keys: keys, Head: cp}); v.Records != int(cp.Seq)+2 {
		t.Fatalf("after repair: %+v", v)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after repair: %v", st.Mode().Perm())
	}
	if l, err := Open(p); err != nil {
		t.Fatalf("open after repair: %v", err)
	} else {
		l.Close()
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*repair*")); len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}
