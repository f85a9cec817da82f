package host

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
	"strings"
	"sync"
	"time"
)

// GenesisHash is the prev of the first record.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxEvidenceLine bounds one record (plugin payloads are at most 16 KiB).
const MaxEvidenceLine = 1 << 20

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

// EvidenceLog appends records to one file, each holding the hash of the
// one before it.
type EvidenceLog struct {
	mu   sync.Mutex
	f    *os.File
	seq  uint64
	last string
	now  func() time.Time
	// OnAppend, when set, sees every record after it is written (airlock
	// dev prints them).
	OnAppend func(Record)
}

// OpenEvidenceLog opens (or creates, mode 0600) an evidence file for
// appending. An existing file must verify, so the chain is never extended
// from a tampered head.
func OpenEvidenceLog(path string) (*EvidenceLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("evidence log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("evidence log: %w", err)
	}
	n, head, err := VerifyEvidence(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("evidence log %s does not verify: %w", path, err)
	}
	return &EvidenceLog{f: f, seq: uint64(n), last: head, now: time.Now}, nil
}

// Append completes r (seq, id, time, prev, hash) and writes it durably.
func (l *EvidenceLog) Append(r Record) (Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
	if len(line) >= MaxEvidenceLine {
		return Record{}, errors.New("evidence record too large")
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return Record{}, fmt.Errorf("write evidence: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return Record{}, fmt.Errorf("sync evidence: %w", err)
	}
	l.seq, l.last = r.Seq, r.Hash
	if l.OnAppend != nil {
		l.OnAppend(r)
	}
	return r, nil
}

// Head is the hash of the last record (GenesisHash when empty). Keeping
// it elsewhere lets `airlock evidence verify --head` detect a truncated tail.
func (l *EvidenceLog) Head() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Close closes the file.
func (l *EvidenceLog) Close() error { return l.f.Close() }

// VerifyError says which line breaks the chain and how.
type VerifyError struct {
	Line   int
	Reason string
}

func (e *VerifyError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// VerifyEvidence reads a log from the start and checks every record: its
// hash, its link to the record before, and consecutive sequence numbers.
// An edited, deleted, inserted or reordered record fails. It returns the
// number of records and the head hash.
func VerifyEvidence(r io.Reader) (int, string, error) {
	if s, ok := r.(io.Seeker); ok {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return 0, "", err
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	last, n := GenesisHash, 0
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return n, last, nil
		}
		n++
		if err == io.EOF {
			return n - 1, last, &VerifyError{Line: n, Reason: "incomplete last record (no newline)"}
		}
		if err != nil {
			return n - 1, last, err
		}
		if len(line) > MaxEvidenceLine {
			return n - 1, last, &VerifyError{Line: n, Reason: "record too long"}
		}
		var rec Record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return n - 1, last, &VerifyError{Line: n, Reason: "not a valid record"}
		}
		switch {
		case rec.Seq != uint64(n):
			return n - 1, last, &VerifyError{Line: n, Reason: fmt.Sprintf("sequence %d, want %d (a record was deleted, inserted or moved)", rec.Seq, n)}
		case rec.Prev != last:
			return n - 1, last, &VerifyError{Line: n, Reason: "does not link to the record before it"}
		}
		want, err := hashOf(rec)
		if err != nil || want != rec.Hash {
			return n - 1, last, &VerifyError{Line: n, Reason: "hash mismatch (the record was edited)"}
		}
		last = rec.Hash
	}
}
