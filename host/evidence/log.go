package evidence

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
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
	mu             sync.Mutex
	f              *os.File
	seq            uint64
	last           string
	lastType       string
	logID          string // the first record's id
	lastCheckpoint *Checkpoint
	now            func() time.Time
	// w is where records go (f, unless WrapFile put a writer
	// in front of it).
	w Writer
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
// from a tampered head.
func Open(path string) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("evidence log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
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
	v, err := VerifyWith(f, VerifyOptions{})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("evidence log %s does not verify: %w", path, err)
	}
	l := &Log{f: f, w: f, seq: uint64(v.Records), last: v.Head, lastCheckpoint: v.Last, now: time.Now}
	if v.Records > 0 {
		if l.logID, err = firstID(f); err != nil {
			f.Close()
			return nil, err
		}
		if v.Unsigned == 0 {
			l.lastType = CheckpointType
		}
	}
	return l, nil
}

// Append completes r (seq, id, time, prev, hash) and writes it durably.
func (l *Log) Append(r Record) (Record, error) {
	if r.Type == CheckpointType {
		return Record{}, errors.New("checkpoints are written by Checkpoint")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(r)
}

func (l *Log) appendLocked(r Record) (Record, error) {
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
	if _, err := l.w.Write(append(line, '\n')); err != nil {
		return Record{}, fmt.Errorf("write evidence: %w", err)
	}
	if err := l.w.Sync(); err != nil {
		return Record{}, fmt.Errorf("sync evidence: %w", err)
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

// Head is the hash of the last record (GenesisHash when empty). Keeping
// it elsewhere lets `airlock evidence verify --head` detect a truncated tail.
func (l *Log) Head() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// firstID reads the id of the log's first record.
func firstID(f *os.File) (string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("evidence log: %w", err)
	}
	var r Record
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return "", fmt.Errorf("evidence log: first record: %w", err)
	}
	return r.ID, nil
}
