package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// Evidence errors.
var (
	// ErrInUse: another process (a running airlock host) holds
	// the evidence log; it is the only writer.
	ErrInUse = errors.New("the evidence log is in use by another process (a running airlock host); only one process may append to it")
	// ErrUnavailable: a record of the call could not be written,
	// so the call (or the step of it) was refused: evidence fails closed
	// unless host.evidence_fail_open is set.
	ErrUnavailable = errors.New("evidence could not be recorded")
	// ErrTorn: a write failed part-way and the part written could not
	// be cut off the file yet; the log takes no record until it can be
	// (retried at each record), or until `airlock evidence repair`.
	ErrTorn = errors.New("the evidence log holds part of a failed write that could not be cut back; it takes no record until it is")
)

// GenesisHash is the prev of the first record.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxLine bounds one record (plugin payloads are at most 16 KiB).
const MaxLine = 1 << 20

// Record is one evidence entry. The host writes every field; a plugin's
// submission only ever becomes Data of a record of type "plugin.<type>".
type Record struct {
	Seq        uint64          `json:"seq"`
	ID         string          `json:"id"`
	Time       time.Time       `json:"time"`
	Type       string          `json:"type"`
	Plugin     string          `json:"plugin,omitempty"`
	Invocation string          `json:"invocation,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Prev       string          `json:"prev"`
	Hash       string          `json:"hash,omitempty"`
}

// hashOf is SHA-256 over the record's JSON without its hash. prev is
// inside the JSON, so each hash covers the whole chain before it.
func hashOf(r Record) (string, error) {
	r.Hash = ""
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Log appends records to one file, each holding the hash of the
// one before it.
type Log struct {
	mu   sync.Mutex
	path string
	f    *os.File
	// size is the length of the whole records in f: where a failed
	// append is cut back to.
	size int64
	// torn says a failed append could not be cut back yet: the log
	// takes no record until it is (ErrTorn).
	torn           bool
	seq            uint64
	last           string
	lastType       string
	logID          string // the first record's id
	lastCheckpoint *Checkpoint
	// follows is the segment an empty log went on from (follow), and
	// segmentDue says the SegmentType record that links this file to
	// it is still to be written, before any other.
	follows    string
	segmentDue bool
	now        func() time.Time
	// w is where records go (f, unless WrapFile put a writer
	// in front of it).
	w    Writer
	wrap func(*os.File) Writer
	// FailOpen lets a call proceed when one of its records cannot be
	// written (host.evidence_fail_open): the failure is only logged. Set
	// it before the log is shared. By default a call whose record cannot
	// be written is refused with ErrUnavailable.
	FailOpen bool
	// OnAppend, when set, sees every record after it is written (airlock
	// dev prints them).
	OnAppend func(Record)
}

// Open opens (or creates, mode 0600) an evidence file for
// appending. An existing file must verify, so the chain is never extended
// from a tampered head. The file may begin the log or be a later segment
// of it (SegmentType). An empty (or missing) file goes on from the
// rotated segment beside it, when there is one (see Follows), which must
// verify too.
func Open(path string) (*Log, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l, err := fromFile(f, path)
	if err != nil {
		f.Close()
		var ve *VerifyError
		switch {
		case errors.Is(err, ErrTornTail):
			return nil, fmt.Errorf("evidence log %s does not verify: %w; `airlock evidence repair` cuts the incomplete record off and records the cut", path, err)
		case errors.As(err, &ve):
			// The full-disk damage of an older release looks like this
			// too; Repair cuts that and refuses anything else.
			return nil, fmt.Errorf("evidence log %s does not verify: %w (if a write failed there on a full disk under an older release, `airlock evidence repair` cuts its remains; it refuses any other damage)", path, err)
		}
		return nil, fmt.Errorf("evidence log %s does not verify: %w", path, err)
	}
	if l.size == 0 {
		// Empty: a new log, or the next segment of a rotated one whose
		// host stopped before it started the segment.
		pf, prev, err := previousSegment(path)
		if err == nil && pf != nil {
			err = l.follow(pf, prev)
			pf.Close()
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

// fromFile is the Log that continues the verified chain in f.
func fromFile(f *os.File, path string) (*Log, error) {
	v, err := VerifyWith(f, VerifyOptions{})
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, f: f, w: f, size: v.Bytes, seq: v.Seq, last: v.Head, logID: v.LogID, lastCheckpoint: v.Last, now: time.Now}
	if v.Records > 0 && v.Unsigned == 0 {
		l.lastType = CheckpointType
	}
	return l, nil
}

// openFile opens path for appending and takes its lock. A symbolic link
// at path is refused: whoever planted it would have this process (root,
// for a repair or an install) create or append to a file of their choice.
func openFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("evidence log: %w", err)
	}
	const flags = os.O_RDWR | os.O_APPEND | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	f, err := os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, 0o600)
	made := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, flags, 0)
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("evidence log: %w: %s is a symbolic link (set host.evidence to the file itself)", fsutil.ErrPlanted, path)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence log: %w", err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is not a regular file", fsutil.ErrPlanted, path)
	}
	if err == nil {
		// Others who may write it could rewrite the trail.
		err = fsutil.CheckOwnFile(path, st)
	}
	if err == nil && made {
		// Made by root's commands (an install with no host running) in
		// the service user's directory: still the service's.
		err = fsutil.GiveToDirOwner(f, path)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("evidence log: %w", err)
	}
	// One writer per log: two would each extend the chain from their own
	// cached head and fork it.
	if err := fsutil.TryLock(f); err != nil {
		f.Close()
		if errors.Is(err, fsutil.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, path)
		}
		return nil, fmt.Errorf("evidence log lock: %w", err)
	}
	return f, nil
}

// Append completes r (seq, id, time, prev, hash) and writes it durably.
// A write that fails, whole or in part, is cut back, so the file ends
// with the last whole record and the chain is not advanced; if it
// cannot be cut back, the log takes no record (ErrTorn) until it can.
// When the log's file was renamed away (rotated), the record begins a
// new segment at the log's path (see Reopen).
func (l *Log) Append(r Record) (Record, error) {
	if strings.HasPrefix(r.Type, "evidence.") {
		return Record{}, errors.New("evidence.* records (checkpoint, segment, repair) are written by the log itself")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(r)
}

func (l *Log) appendLocked(r Record) (Record, error) {
	if err := l.ready(); err != nil {
		return Record{}, err
	}
	return l.write(r)
}

// write completes r and writes it.
func (l *Log) write(r Record) (Record, error) {
	if len(r.Data) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.Data); err != nil {
			return Record{}, fmt.Errorf("evidence data is not JSON: %w", err)
		}
		r.Data = buf.Bytes()
	}
	r.Seq = l.seq + 1
	r.Time = l.now().UTC()
	r.Prev = l.last
	r.ID = ""
	h, err := hashOf(r)
	if err != nil {
		return Record{}, err
	}
	r.ID = "ev-" + h[:16]
	if r.Hash, err = hashOf(r); err != nil {
		return Record{}, err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return Record{}, err
	}
	if len(line) >= MaxLine {
		return Record{}, errors.New("evidence record too large")
	}
	if err := l.writeLine(append(line, '\n')); err != nil {
		return Record{}, err
	}
	l.seq, l.last, l.lastType = r.Seq, r.Hash, r.Type
	if l.logID == "" {
		l.logID = r.ID
	}
	if l.OnAppend != nil {
		l.OnAppend(r)
	}
	return r, nil
}

// writeLine writes one record's line durably, or cuts the file back to
// the records before it.
func (l *Log) writeLine(line []byte) error {
	n, err := l.w.Write(line)
	switch {
	case err != nil:
		err = fmt.Errorf("write evidence: %w", err)
	case n != len(line):
		err = fmt.Errorf("write evidence: %w", io.ErrShortWrite)
	default:
		if err = l.w.Sync(); err != nil {
			err = fmt.Errorf("sync evidence: %w", err)
		}
	}
	if err == nil {
		l.size += int64(len(line))
		return nil
	}
	// Part of the line may be in the file (a short write), or all of it
	// without being durable (a failed sync): either way it is not a
	// record of the chain, and the next one must not follow it.
	l.torn = true
	if cerr := l.cutBack(); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

// truncater is a Writer that cuts its file back itself (a test's).
type truncater interface{ Truncate(size int64) error }

// cutBack cuts the file back to its whole records, durably.
func (l *Log) cutBack() error {
	var err error
	if t, ok := l.w.(truncater); ok {
		err = t.Truncate(l.size)
	} else {
		err = l.f.Truncate(l.size)
	}
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTorn, err)
	}
	l.torn = false
	return nil
}

// Head is the hash of the last record (GenesisHash when empty). Keeping
// it elsewhere lets `airlock evidence verify --head` detect a truncated tail.
func (l *Log) Head() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
