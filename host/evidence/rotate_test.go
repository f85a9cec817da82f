package evidence

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for range n {
		if _, err := l.Append(Record{Type: "invocation.start", Plugin: "p"}); err != nil {
			t.Fatal(err)
		}
	}
}

// rotatedLog writes a log rotated twice, as logrotate does it (rename,
// then the host follows): evidence.jsonl.2 (records 1-4, the first
// segment), evidence.jsonl.1 (5-9) and evidence.jsonl (10-13). The first
// rotation is followed at the next record, the second by Reopen.
func rotatedLog(t *testing.T) (dir string, key *Key, paths []string) {
	t.Helper()
	dir = t.TempDir()
	key = testKey(t)
	p := filepath.Join(dir, "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 3)
	if _, err := l.Checkpoint(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".2"); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2) // records 5 (segment) and 6, 7 in the new file
	appendN(t, l, 1)
	if _, err := l.Checkpoint(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	// logrotate's create: an empty file at the path.
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	if _, err := l.Checkpoint(key); err != nil {
		t.Fatal(err)
	}
	return dir, key, []string{p + ".2", p + ".1", p}
}

// A rotated log's segments verify as one chain, given in any order; each
// later segment verifies alone from its segment record; a log reopened
// on its latest segment continues the chain.
func TestRotationVerifiesAsOneChain(t *testing.T) {
	_, key, paths := rotatedLog(t)
	keys, _ := ParseJWKS(key.JWKS())
	v, err := VerifyFiles([]string{paths[2], paths[0], paths[1]}, VerifyOptions{Keys: keys})
	if err != nil || v.First != 1 || v.Seq != 13 || v.Records != 13 || v.Unsigned != 0 {
		t.Fatalf("three segments: %+v %v", v, err)
	}
	// The middle segment alone: from its segment record to its checkpoint.
	mid, err := VerifyFiles(paths[1:2], VerifyOptions{Keys: keys})
	if err != nil || mid.First != 5 || mid.Seq != 9 || mid.Unsigned != 0 || mid.LogID != v.LogID {
		t.Fatalf("the middle segment alone: %+v %v", mid, err)
	}
	last, err := VerifyFiles(paths[2:], VerifyOptions{Keys: keys, Head: v.Last})
	if err != nil || last.First != 10 || last.HeadAt != 13 {
		t.Fatalf("the last segment alone, with the head: %+v %v", last, err)
	}
	b, _ := os.ReadFile(paths[2])
	if first, _, _ := strings.Cut(string(b), "\n"); !strings.Contains(first, `"type":"`+SegmentType+`"`) {
		t.Fatalf("the new segment does not begin with a segment record: %s", first)
	}
	l, err := Open(paths[2])
	if err != nil {
		t.Fatalf("reopen the latest segment: %v", err)
	}
	defer l.Close()
	if r, err := l.Append(Record{Type: "lifecycle.shutdown"}); err != nil || r.Seq != 14 || r.Prev != v.Head {
		t.Fatalf("append after reopening a segment: %+v %v", r, err)
	}
	if cp, err := l.Checkpoint(key); err != nil || cp.LogID != v.LogID {
		t.Fatalf("checkpoint of a reopened segment: %+v %v", cp, err)
	}
}

// A missing, altered, rewritten, duplicated or foreign segment fails.
func TestRotationTamperedSegment(t *testing.T) {
	dir, key, paths := rotatedLog(t)
	keys, _ := ParseJWKS(key.JWKS())
	read := func(p string) []string {
		b, _ := os.ReadFile(p)
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	write := func(name string, lines []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mid := read(paths[1])
	edited := append([]string(nil), mid...)
	edited[2] = strings.Replace(edited[2], `"plugin":"p"`, `"plugin":"q"`, 1)
	// Rewritten whole from its segment record on, every hash recomputed,
	// its checkpoint turned into a plain record (no key to sign one):
	// what someone without the key can do.
	rewritten := append([]string(nil), edited...)
	cpAt := len(rewritten) - 1
	rewritten[cpAt] = rewritten[cpAt][:strings.Index(rewritten[cpAt], `"type":`)] + `"type":"invocation.end","prev":"x","hash":"y"}`
	rewritten = rechainFrom(t, rewritten)
	other := t.TempDir()
	ol, err := Open(filepath.Join(other, "evidence.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, ol, 4)
	ol.Close()
	os.Rename(filepath.Join(other, "evidence.jsonl"), filepath.Join(other, "evidence.jsonl.1"))
	ol, _ = Open(filepath.Join(other, "evidence.jsonl.1"))
	ol.path = filepath.Join(other, "evidence.jsonl")
	appendN(t, ol, 5) // a segment of another log, beginning at record 5 too
	ol.Close()
	foreign := read(filepath.Join(other, "evidence.jsonl"))
	for _, tt := range []struct {
		name   string
		files  []string
		reason string
	}{
		{"middle segment missing", []string{paths[0], paths[2]}, "does not continue the one before it"},
		{"middle segment edited", []string{paths[0], write("edited", edited), paths[2]}, "hash mismatch"},
		{"middle segment rewritten", []string{paths[0], write("rewritten", rewritten), paths[2]}, "does not link to the last record of the file before it"},
		{"segment given twice", []string{paths[0], paths[1], paths[1], paths[2]}, "given twice"},
		{"segment of another log", []string{paths[0], write("foreign", foreign)}, "does not link to the last record of the file before it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := VerifyFiles(tt.files, VerifyOptions{Keys: keys})
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want %q", err, tt.reason)
			}
		})
	}
	// A rewritten segment alone fails at its checkpoint, with the key.
	if _, err := VerifyFiles([]string{write("alone", rewritten)}, VerifyOptions{Keys: keys}); err == nil {
		t.Fatal("a rewritten segment verified alone against the key")
	}
}

// rechainFrom recomputes every id and hash of lines from the prev of
// the first, as the writer does.
func rechainFrom(t *testing.T, lines []string) []string {
	t.Helper()
	prev := ""
	for i, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			r.Prev = prev
		}
		r.ID, r.Hash = "", ""
		h, _ := hashOf(r)
		r.ID = "ev-" + h[:16]
		r.Hash, _ = hashOf(r)
		b, _ := json.Marshal(r)
		lines[i], prev = string(b), r.Hash
	}
	return lines
}

// A file at the log's path that the log did not start (not empty) is
// not written into: records go on in the renamed file, and Reopen says
// why.
func TestRotationForeignFileAtPath(t *testing.T) {
	l, p := newLog(t)
	appendN(t, l, 2)
	os.Rename(p, p+".1")
	os.WriteFile(p, []byte("not ours\n"), 0o600)
	if err := l.Reopen(); !errors.Is(err, ErrSegmentNotEmpty) {
		t.Fatalf("reopen onto a foreign file: %v", err)
	}
	appendN(t, l, 1)
	if b, _ := os.ReadFile(p); string(b) != "not ours\n" {
		t.Fatalf("the foreign file was written: %q", b)
	}
	if v := verifyFile(t, p+".1", VerifyOptions{}); v.Records != 3 {
		t.Fatalf("the renamed file: %+v", v)
	}
}

// A segment that logrotate compressed verifies with the others.
func TestRotationCompressedSegment(t *testing.T) {
	_, _, paths := rotatedLog(t)
	b, _ := os.ReadFile(paths[0])
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(paths[0]+".gz", z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := VerifyFiles([]string{paths[0] + ".gz", paths[1], paths[2]}, VerifyOptions{}); err != nil || v.Records != 13 {
		t.Fatalf("with a compressed segment: %+v %v", v, err)
	}
}

// Once a rename is noticed nothing more goes to the renamed file (it may
// be being compressed): a checkpoint after the rename opens the new
// segment.
func TestRotationCheckpointGoesToTheNewSegment(t *testing.T) {
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	key := testKey(t)
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 2)
	os.Rename(p, p+".1")
	before, _ := os.ReadFile(p + ".1")
	cp, err := l.Checkpoint(key)
	if err != nil || cp.Seq != 3 {
		t.Fatalf("checkpoint after a rename: %+v %v", cp, err)
	}
	if after, _ := os.ReadFile(p + ".1"); !bytes.Equal(after, before) {
		t.Fatal("the renamed file was written after the rename")
	}
	keys, _ := ParseJWKS(key.JWKS())
	if v, err := VerifyFiles([]string{p}, VerifyOptions{Keys: keys, Head: cp}); err != nil || v.First != 3 || v.Records != 2 {
		t.Fatalf("the new segment: %+v %v", v, err)
	}
}
