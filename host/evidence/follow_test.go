package evidence

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crashedAfterRotation writes records 1-3 and a checkpoint (4) to
// evidence.jsonl, renames the file to rotated (as logrotate does) and
// closes the log without it noticing: the host died before its next
// record. It returns the log's path and its head.
func crashedAfterRotation(t *testing.T, dir, rotated string, key *Key) (string, string) {
	t.Helper()
	p := filepath.Join(dir, "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3)
	if _, err := l.Checkpoint(key); err != nil {
		t.Fatal(err)
	}
	head := l.Head()
	if err := os.Rename(p, filepath.Join(dir, rotated)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	return p, head
}

// A host restarted after its log was rotated and before it wrote to the
// new file (a crash, a kill, a reboot, or a rotation while it was down)
// goes on with the same chain: the file at its path, empty (logrotate's
// create) or missing, becomes the next segment of the rotated one,
// whatever logrotate named it and whether it compressed it already.
func TestRestartAfterRotationContinuesChain(t *testing.T) {
	for _, tc := range []struct {
		name, rotated string
		create, gz    bool
	}{
		{name: "numbered, create", rotated: "evidence.jsonl.1", create: true},
		{name: "numbered, no create", rotated: "evidence.jsonl.1"},
		{name: "dated", rotated: "evidence.jsonl-20261203", create: true},
		{name: "compressed at once", rotated: "evidence.jsonl.1", gz: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, key := t.TempDir(), testKey(t)
			keys, _ := ParseJWKS(key.JWKS())
			p, head := crashedAfterRotation(t, dir, tc.rotated, key)
			prev := filepath.Join(dir, tc.rotated)
			if tc.gz {
				prev = gzipFile(t, prev)
			}
			if tc.create {
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.Follows() != prev || l.Head() != head {
				t.Fatalf("the log follows %q at head %s, want %q at %s", l.Follows(), l.Head(), prev, head)
			}
			if cp := l.LatestCheckpoint(); cp == nil || cp.Seq != 3 {
				t.Fatalf("the latest checkpoint after the restart: %+v", cp)
			}
			r, err := l.Append(Record{Type: "lifecycle.start"})
			if err != nil || r.Seq != 6 {
				t.Fatalf("the first record after the restart: %+v %v (want seq 6, after the segment record)", r, err)
			}
			if _, err := l.Checkpoint(key); err != nil {
				t.Fatal(err)
			}
			v, err := VerifyFiles([]string{p, prev}, VerifyOptions{Keys: keys})
			if err != nil || v.First != 1 || v.Seq != 7 || v.Unsigned != 0 {
				t.Fatalf("the two files as one chain: %+v %v", v, err)
			}
			alone, err := VerifyFiles([]string{p}, VerifyOptions{Keys: keys})
			if err != nil || alone.First != 5 || alone.LogID != v.LogID {
				t.Fatalf("the new segment alone: %+v %v", alone, err)
			}
		})
	}
}

func gzipFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if err := os.WriteFile(p+".gz", z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	return p + ".gz"
}

// Of several rotated segments the log goes on from the latest (the one
// whose first record is the latest), whatever the order of their names;
// files with the log's name as a prefix that hold no records, symbolic
// links and names that only begin like it are passed over.
func TestRestartFollowsLatestSegment(t *testing.T) {
	dir, key, paths := rotatedLog(t) // .2: 1-4, .1: 5-9, the log: 10-13
	p := paths[2]
	// logrotate shifts them, renaming the log last; the host was down.
	for _, mv := range [][2]string{{p + ".2", p + ".3"}, {p + ".1", p + ".2"}, {p, p + ".1"}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{
		"evidence.jsonl.sha256": "not a record\n",
		"evidence.jsonl.0":      "", // an empty rotated log
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A foreign log that begins later than any segment of this one, under
	// names the log does not take for its own.
	other := filepath.Join(t.TempDir(), "other.jsonl")
	ol, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, ol, 20)
	ol.Close()
	if err := os.Symlink(other, p+".99"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(other)
	if err := os.WriteFile(p+"x", b, 0o600); err != nil {
		t.Fatal(err)
	}

	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Follows() != p+".1" {
		t.Fatalf("the log follows %q, want %q", l.Follows(), p+".1")
	}
	if r, err := l.Append(Record{Type: "lifecycle.start"}); err != nil || r.Seq != 15 {
		t.Fatalf("the first record: %+v %v", r, err)
	}
	keys, _ := ParseJWKS(key.JWKS())
	if v, err := VerifyFiles([]string{p + ".3", p + ".2", p + ".1", p}, VerifyOptions{Keys: keys}); err != nil || v.Records != 15 {
		t.Fatalf("four segments: %+v %v", v, err)
	}
}

// A segment still held by a running host (the rename not yet noticed) is
// not followed: a second host on the same path is in use, and the first
// goes on into the file at the path as before, with one chain.
func TestRestartWhileOldHostRuns(t *testing.T) {
	l1, p := newLog(t)
	appendN(t, l1, 2)
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	if l2, err := Open(p); !errors.Is(err, ErrInUse) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("a second host on the rotated log: %v, want ErrInUse", err)
	}
	appendN(t, l1, 1)
	if v, err := VerifyFiles([]string{p + ".1", p}, VerifyOptions{}); err != nil || v.Records != 4 {
		t.Fatalf("the first host's log after the refused second: %+v %v", v, err)
	}
}

// A rotated segment that does not verify is not continued: Open fails,
// saying how to go on, and writes nothing to either file. Two files
// that begin at the same record are refused too.
func TestRestartAfterRotationRefusesBrokenSegment(t *testing.T) {
	t.Run("damaged", func(t *testing.T) {
		dir, key := t.TempDir(), testKey(t)
		p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
		prev := p + ".1"
		b, _ := os.ReadFile(prev)
		i := bytes.Index(b, []byte(`"plugin":"p"`)) + len(`"plugin":"`)
		damaged := []byte(flipBit(string(b), i))
		if err := os.WriteFile(prev, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(p)
		if err == nil {
			l.Close()
			t.Fatal("a damaged previous segment was continued")
		}
		if !strings.Contains(err.Error(), prev) || !strings.Contains(err.Error(), "airlock evidence repair") {
			t.Fatalf("the error does not name the segment and what to do: %v", err)
		}
		if st, err := os.Stat(p); err != nil || st.Size() != 0 {
			t.Fatalf("the log's file after the refusal: %v %v", st, err)
		}
		if after, _ := os.ReadFile(prev); !bytes.Equal(after, damaged) {
			t.Fatal("the previous segment changed")
		}
	})
	t.Run("two begin at one record", func(t *testing.T) {
		dir, key := t.TempDir(), testKey(t)
		p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
		b, _ := os.ReadFile(p + ".1")
		if err := os.WriteFile(p+"-20261203", b, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(p)
		if err == nil {
			l.Close()
			t.Fatal("two candidate segments: one was picked")
		}
		if !strings.Contains(err.Error(), "both begin at record 1") {
			t.Fatalf("error: %v", err)
		}
	})
}

// A log that goes on from a rotated segment and is rotated again before
// its first record starts the next file with the segment record; the
// empty file in between verifies with the rest.
func TestFollowThenRotatedAgain(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.2", key)
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Append(Record{Type: "lifecycle.start"}); err != nil || r.Seq != 6 {
		t.Fatalf("the first record: %+v %v", r, err)
	}
	if v, err := VerifyFiles([]string{p + ".2", p + ".1", p}, VerifyOptions{}); err != nil || v.Records != 6 {
		t.Fatalf("three files: %+v %v", v, err)
	}
}

// A log whose file was rotated and then removed (logrotate compressed it
// at once) while no new file could be started at its path (a directory,
// or a file the host may not open, left there) refuses records instead
// of writing them to a file with no name, where they would be lost; once
// the path can be used, the next record starts the new segment.
func TestRotatedAndRemovedRefusesRecords(t *testing.T) {
	l, p := newLog(t)
	appendN(t, l, 2)
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	// Renamed, not removed: the record goes on in the renamed file.
	if r, err := l.Append(Record{Type: "invocation.start"}); err != nil || r.Seq != 3 {
		t.Fatalf("a record while the renamed file is there: %+v %v", r, err)
	}
	if err := os.Remove(p + ".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(Record{Type: "invocation.start"}); !errors.Is(err, ErrRemoved) {
		t.Fatalf("a record with nowhere to go: %v, want ErrRemoved", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Append(Record{Type: "invocation.start"}); err != nil || r.Seq != 5 {
		t.Fatalf("the first record once the path is usable: %+v %v (want seq 5, after the segment record)", r, err)
	}
	if v, err := VerifyFiles([]string{p}, VerifyOptions{}); err != nil || v.First != 4 || v.Seq != 5 {
		t.Fatalf("the new segment: %+v %v", v, err)
	}
}

// newLog opens a new log in a directory of its own, closed at the
// test's end.
func newLog(t *testing.T) (*Log, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, p
}
