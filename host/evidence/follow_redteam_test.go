package evidence

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A log beside another host's whose name begins with its own (a
// canary's "evidence.jsonl-canary") is not that log's next segment: a
// first start begins a new log, whether the other host runs (it is not
// "in use") or not (its chain is not forked).
func TestRestartIgnoresSiblingLog(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "evidence.jsonl")
	other, err := Open(p + "-canary")
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, other, 2)
	for _, running := range []bool{true, false} {
		if !running {
			other.Close()
		}
		l, err := Open(p)
		if err != nil {
			t.Fatalf("other host running %v: %v", running, err)
		}
		if l.Follows() != "" {
			t.Fatalf("the log follows another log, %s", l.Follows())
		}
		l.Close()
	}
}

// laterSegment is a segment of another log that begins after record 1.
func laterSegment(t *testing.T) []byte {
	t.Helper()
	o := filepath.Join(t.TempDir(), "other.jsonl")
	ol, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, ol, 3)
	if err := os.Rename(o, o+".1"); err != nil {
		t.Fatal(err)
	}
	appendN(t, ol, 2)
	ol.Close()
	b, err := os.ReadFile(o)
	if err != nil || seqOf(b[:bytes.IndexByte(b, '\n')+1]) < 2 {
		t.Fatalf("the other log's second segment: %v", err)
	}
	return b
}

// A file planted beside the log under a segment's name, beginning
// later than the real segment, that another user wrote (theirs, or one
// others may write) is refused, naming it: the log must not go on from a
// chain someone else made.
func TestRestartRefusesPlantedSegment(t *testing.T) {
	testenv.NeedsRoot(t, "giving a file to another user")
	for _, tc := range []struct {
		name string
		uid  int
		mode os.FileMode
	}{{"another user's", 65534, 0o600}, {"writable by others", 0, 0o666}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, key := t.TempDir(), testKey(t)
			p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
			planted := p + ".0"
			if err := os.WriteFile(planted, laterSegment(t), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(planted, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(planted, tc.uid, tc.uid); err != nil {
				t.Fatal(err)
			}
			l, err := Open(p)
			if err == nil {
				defer l.Close()
				t.Fatalf("the log went on from %q", l.Follows())
			}
			if !errors.Is(err, fsutil.ErrPlanted) || !strings.Contains(err.Error(), planted) {
				t.Fatalf("error: %v", err)
			}
		})
	}
}

// A FIFO put at a candidate's name after the directory was read does
// not hang the host's start; a link is not followed.
func TestCandidateNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "evidence.jsonl.1")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, filepath.Join(dir, "evidence.jsonl.2")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, filepath.Join(dir, "evidence.jsonl.2")} {
		f, _, _, _, err := openCandidate(p)
		if f != nil || err != nil {
			t.Fatalf("%s: %v %v", p, f, err)
		}
	}
}

// logrotate's compress without delaycompress, cut short by a crash:
// the segment and part of its compressed copy are both there. The log
// goes on from the whole, uncompressed one.
func TestRestartAfterCrashInCompression(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	p, head := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
	b, _ := os.ReadFile(p + ".1")
	gz := gzipFile(t, p+".1")
	z, _ := os.ReadFile(gz)
	if err := os.WriteFile(gz, z[:len(z)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".1", b, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Follows() != p+".1" || l.Head() != head {
		t.Fatalf("the log follows %q at %s", l.Follows(), l.Head())
	}
}

// A rotated segment compressed by other than gzip (compresscmd xz) is
// not read; rather than begin a new log, the host refuses to start,
// naming it and what to do.
func TestRestartRefusesUnreadableSegment(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
	if err := os.Rename(p+".1", p+".1.xz"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p + ".1.xz")
	if err := os.WriteFile(p+".1.xz", append([]byte("\xfd7zXZ\x00"), b...), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(p)
	if err == nil {
		l.Close()
		t.Fatal("a new log began beside an unreadable segment")
	}
	if !strings.Contains(err.Error(), p+".1.xz") || !strings.Contains(err.Error(), "decompress it") {
		t.Fatalf("error: %v", err)
	}
}

// A host killed while it wrote the segment record leaves part of it;
// `airlock evidence repair`, which Open names, cuts it and records the
// cut in the chain that the segment continues, not in a new log.
func TestRepairCutSegmentRecord(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1)
	l.Close()
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, b[:bytes.IndexByte(b, '\n')/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(p); err == nil || !strings.Contains(err.Error(), "airlock evidence repair") {
		if l != nil {
			l.Close()
		}
		t.Fatalf("open after the cut-off segment record: %v", err)
	}
	if _, err := Repair(p); err != nil {
		t.Fatal(err)
	}
	if v, err := VerifyFiles([]string{p + ".1", p}, VerifyOptions{}); err != nil || v.Records != 6 {
		t.Fatalf("the segments after the repair: %+v %v", v, err)
	}
}

// A segment of another log copied in beside this log's, under a
// segment's name and beginning later, is not continued: the host
// refuses to start, naming both.
func TestRestartRefusesSegmentOfAnotherLog(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	p, _ := crashedAfterRotation(t, dir, "evidence.jsonl.1", key)
	if err := os.WriteFile(p+".0", laterSegment(t), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(p)
	if err == nil {
		defer l.Close()
		t.Fatalf("the log went on from %q", l.Follows())
	}
	if !strings.Contains(err.Error(), "segments of two logs") || !strings.Contains(err.Error(), p+".0") || !strings.Contains(err.Error(), p+".1") {
		t.Fatalf("error: %v", err)
	}
}

// The names a restart takes for the log's rotated segments: logrotate's
// numbered and dated ones, with one compressor's extension; not another
// log's whose name begins like it, nor a checksum or a backup.
func TestRotatedName(t *testing.T) {
	const base = "evidence.jsonl"
	for name, want := range map[string]bool{
		"evidence.jsonl.1": true, "evidence.jsonl.1.gz": true, "evidence.jsonl-20261203": true,
		"evidence.jsonl-2026-12-03_1764720000.gz": true, "evidence.jsonl_7.xz": true,
		"evidence.jsonl-canary": false, "evidence.jsonl.bak": false, "evidence.jsonl.sha256": false,
		"evidence.jsonl.1.sha256sum.txt": false, "evidence.jsonl.": false, "evidence.jsonl": false,
		"evidence.jsonlx.1": false, "evidence.jsonl.1.g-z": false,
	} {
		if got := rotatedName(name, base); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
