package evidence

import (
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

// previousSegment finds the segment an empty log at path continues:
// among the regular files in path's directory whose names are path's
// base followed by '.', '-' or '_', the one whose first record is the
// latest; "" when there is none. Files whose first line is not a record
// are not segments and are passed over.
func previousSegment(path string) (string, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("evidence log: looking for the segment it continues: %w", err)
	}
	var (
		best      string
		bestFirst uint64
	)
	for _, e := range entries {
		name := e.Name()
		if len(name) <= len(base) || !strings.HasPrefix(name, base) || !strings.ContainsRune(".-_", rune(name[len(base)])) ||
			!e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, name)
		first, err := firstSeq(p)
		if err != nil {
			return "", fmt.Errorf("evidence log: reading %s, which may be the segment it continues: %w", p, err)
		}
		switch {
		case first == 0:
			continue
		case first == bestFirst:
			return "", fmt.Errorf("evidence log: %s and %s both begin at record %d, so which one the log continues is unclear; move the one that is not this log's out of %s", best, p, first, dir)
		case first > bestFirst:
			best, bestFirst = p, first
		}
	}
	return best, nil
}

// follow makes an empty log the next segment of the one at prev: its
// chain (seq, head, log id, latest checkpoint) goes on from prev's last
// record, and the first record written begins with a SegmentType record.
// prev must verify whole; while another process (a host still running
// on it) holds it, the log is in use.
func (l *Log) follow(prev string) error {
	f, err := os.OpenFile(prev, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("evidence log: the segment it continues: %w", err)
	}
	defer f.Close()
	if err := fsutil.TryLock(f); err != nil {
		if errors.Is(err, fsutil.ErrLocked) {
			return fmt.Errorf("%w: %s (the log's previous segment)", ErrInUse, prev)
		}
		return fmt.Errorf("evidence log lock: %w", err)
	}
	var v Verified
	err = readSegmentFrom(f, prev, func(r io.Reader) error {
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
