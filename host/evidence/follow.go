package evidence

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// A log opened on an empty or missing file does not always begin a new
// log: when the file was rotated away while no host was following it (a
// crash, a kill or a reboot after the rename and before the next
// record, or a rotation while the host was down), the chain goes on from
// the segment that was renamed. That segment is found beside the log's
// file by its name: rotated names keep the log's file name as a prefix
// (logrotate's numbered and dated names, compressed or not).

// rotatedName says whether name is one logrotate gives base's file: base,
// '.', '-' or '_', a number or a date (digits and those separators), and
// at most one extension (a compressor's). Another log whose name only
// begins with base's ("evidence.jsonl-canary") is not taken for one.
func rotatedName(name, base string) bool {
	rest, ok := strings.CutPrefix(name, base)
	if !ok || len(rest) < 2 || !strings.ContainsRune(".-_", rune(rest[0])) || rest[1] < '0' || rest[1] > '9' {
		return false
	}
	rest = rest[1:]
	if i := strings.LastIndexByte(rest, '.'); i > 0 && strings.ContainsFunc(rest[i+1:], isLetter) {
		if strings.ContainsFunc(rest[i+1:], func(r rune) bool { return !isLetter(r) && (r < '0' || r > '9') }) {
			return false
		}
		rest = rest[:i]
	}
	return !strings.ContainsFunc(rest, func(r rune) bool { return !strings.ContainsRune(".-_", r) && (r < '0' || r > '9') })
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// openCandidate opens a file that may be the segment a log continues, as
// openFile does the log's own: not through a link, not blocking on a
// FIFO put there since the directory was read, and only a regular file
// that no other user could have written. It returns the file (at its
// start), the seq of its first record (0 when it has none) and whether
// it holds anything at all, and the id of the log it is a segment of.
func openCandidate(p string) (*os.File, uint64, bool, string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, 0, false, "", nil // a link: not a segment
	}
	if err != nil {
		return nil, 0, false, "", err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, false, "", nil
	}
	if err == nil {
		err = fsutil.CheckOwnFile(p, st)
	}
	var (
		seq      uint64
		nonEmpty bool
		logID    string
	)
	if err == nil {
		err = readSegmentFrom(f, p, func(r io.Reader) error {
			line, err := bufio.NewReaderSize(r, 64<<10).ReadSlice('\n')
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
				return err
			}
			nonEmpty = len(line) > 0
			seq, logID = seqOf(line), logIDOf(line)
			return nil
		})
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, false, "", err
	}
	return f, seq, nonEmpty, logID, nil
}

// previousSegment finds the segment an empty log at path continues:
// among the regular files in path's directory with a rotated name of
// path's (rotatedName), the one whose first record is the latest,
// opened; nil when there is none. Empty ones are passed over; one that
// holds something other than records is refused, as the log it would
// leave behind could not be told from a new one, and so are segments of
// two logs (one copied in from another host's).
func previousSegment(path string) (*os.File, string, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("evidence log: looking for the segment it continues: %w", err)
	}
	var (
		best      *os.File
		bestName  string
		bestFirst uint64
		logID     string // of the candidates so far, and one of them
		logIDFrom string
	)
	fail := func(err error) (*os.File, string, error) {
		if best != nil {
			best.Close()
		}
		return nil, "", err
	}
	for _, e := range entries {
		name := e.Name()
		if !rotatedName(name, base) || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, name)
		f, first, nonEmpty, id, err := openCandidate(p)
		if err != nil {
			return fail(fmt.Errorf("evidence log: reading %s, which may be the segment it continues: %w", p, err))
		}
		if id != "" && logID != "" && id != logID {
			f.Close()
			return fail(fmt.Errorf("evidence log: %s and %s are segments of two logs (%s and %s), so which one the log continues is unclear; move the one that is not this log's out of %s", logIDFrom, p, logID, id, dir))
		}
		if id != "" && logID == "" {
			logID, logIDFrom = id, p
		}
		switch {
		case f == nil:
			continue
		case first == 0 && nonEmpty:
			f.Close()
			return fail(fmt.Errorf("evidence log: %s is named like a rotated segment of %s but does not begin with a record (compressed other than with gzip?): decompress it, or move it out of %s", p, path, dir))
		case first == 0 || first < bestFirst:
			f.Close()
		case first == bestFirst && p == bestName+".gz":
			// logrotate's compressed copy of bestName, left beside it
			// by a crash before it removed the original: the original
			// is whole.
			f.Close()
		case first == bestFirst && bestName == p+".gz":
			best.Close()
			best, bestName = f, p
		case first == bestFirst:
			f.Close()
			return fail(fmt.Errorf("evidence log: %s and %s both begin at record %d, so which one the log continues is unclear; move the one that is not this log's out of %s", bestName, p, first, dir))
		default:
			if best != nil {
				best.Close()
			}
			best, bestName, bestFirst = f, p, first
		}
	}
	return best, bestName, nil
}

// follow makes an empty log the next segment of the one open in f (at
// prev): its chain (seq, head, log id, latest checkpoint) goes on from
// prev's last record, and the first record written begins with a
// SegmentType record. prev must verify whole; while another process (a
// host still running on it) holds it, the log is in use.
func (l *Log) follow(f *os.File, prev string) error {
	if err := fsutil.TryLock(f); err != nil {
		if errors.Is(err, fsutil.ErrLocked) {
			return fmt.Errorf("%w: %s (the log's previous segment)", ErrInUse, prev)
		}
		return fmt.Errorf("evidence log lock: %w", err)
	}
	var v Verified
	err := readSegmentFrom(f, prev, func(r io.Reader) error {
		var err error
		v, err = VerifyWith(r, VerifyOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("evidence log %s is empty and would continue the chain of %s, which does not verify: %w "+
			"(move it back to %s and run `airlock evidence repair` if the last write was cut off, or move it out of %s to begin a new log)",
			l.path, prev, err, l.path, filepath.Dir(prev))
	}
	l.seq, l.last, l.logID, l.lastCheckpoint = v.Seq, v.Head, v.LogID, v.Last
	if v.Unsigned == 0 {
		l.lastType = CheckpointType
	}
	l.follows, l.segmentDue = prev, true
	return nil
}

// Follows is the file of the segment this log went on from when it was
// opened on an empty or missing file ("" when it did not).
func (l *Log) Follows() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.follows
}
