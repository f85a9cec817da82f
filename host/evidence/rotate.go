package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Rotation errors.
var (
	// ErrSegmentNotEmpty: the file now at the log's path holds data the
	// log did not write there, so no new segment is started in it;
	// records go on in the renamed file.
	ErrSegmentNotEmpty = errors.New("the file now at the evidence log's path is not empty: the log goes on writing its renamed file")
	// ErrRemoved: the log's file was rotated away and removed, and a
	// new file could not be started at its path; records are refused
	// (evidence fails closed) rather than written where they would be
	// lost, until one can be.
	ErrRemoved = errors.New("the evidence log has no file to write to")
)

// Reopen follows a rotation: when the log's file has been renamed away
// (or removed), the log starts a new segment in a file at its path
// (created mode 0600 if missing; an empty file that logrotate's create
// left there is used). It does nothing while the path still names the
// open file. Append and Checkpoint follow a rotation by themselves
// before they write; Reopen, called when the operator's rotation
// signals (SIGHUP), makes the switch at once. Nothing is written to a
// renamed file once it is noticed: logrotate may be compressing it.
func (l *Log) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.torn {
		if err := l.cutBack(); err != nil {
			return err
		}
	}
	if !l.renamed() {
		return nil
	}
	return l.startSegment()
}

// ready readies the log for a record: a failed write cut back (or
// ErrTorn), a rotation followed.
func (l *Log) ready() error {
	if l.torn {
		if err := l.cutBack(); err != nil {
			return err
		}
	}
	if l.renamed() {
		// Until the new segment can be started, records go on in the
		// renamed file, where the chain stays whole: unless that file
		// has been removed too (logrotate compressed it), where they
		// would be lost.
		if err := l.startSegment(); err != nil && l.unlinked() {
			return fmt.Errorf("%w: the log's file was rotated and removed (compressed?), and no new one could be started at %s: %w",
				ErrRemoved, l.path, err)
		}
	}
	if l.segmentDue {
		return l.writeSegment()
	}
	return nil
}

// writeSegment writes the SegmentType record that begins a segment.
func (l *Log) writeSegment() error {
	data, _ := json.Marshal(segment{LogID: l.logID})
	if _, err := l.write(Record{Type: SegmentType, Data: data}); err != nil {
		return err
	}
	l.segmentDue = false
	return nil
}

// unlinked says whether the open file has no name left.
func (l *Log) unlinked() bool {
	st, err := l.f.Stat()
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Nlink == 0
}

// renamed says whether the log's path no longer names its open file.
func (l *Log) renamed() bool {
	st, err := os.Stat(l.path)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	cur, err := l.f.Stat()
	return err == nil && !os.SameFile(st, cur)
}

// startSegment moves the log to a new file at its path, first writing
// there the segment record that carries the chain on. On failure the
// log stays on its old file, unchanged.
func (l *Log) startSegment() error {
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		f.Close()
		if err != nil {
			return fmt.Errorf("evidence log: %w", err)
		}
		return ErrSegmentNotEmpty
	}
	old, oldW, oldSize := l.f, l.w, l.size
	l.f, l.size = f, 0
	l.w = Writer(f)
	if l.wrap != nil {
		l.w = l.wrap(f)
	}
	if l.seq == 0 {
		// Nothing written yet: the new file begins the log.
		old.Close()
		return nil
	}
	if err := l.writeSegment(); err != nil {
		l.torn = false
		_ = f.Truncate(0)
		f.Close()
		l.f, l.w, l.size = old, oldW, oldSize
		return err
	}
	old.Close()
	return nil
}
