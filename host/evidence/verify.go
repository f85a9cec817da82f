package evidence

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Verification errors beyond a broken line (VerifyError).
var (
	// ErrEvidenceEmpty: keys were given, but the log holds no record, so
	// nothing is signed (an emptied log must not pass as verified).
	ErrEvidenceEmpty = errors.New("the log is empty: no record, so nothing is signed")
	// ErrHeadTruncated: the log ends before the saved head.
	ErrHeadTruncated = errors.New("records were removed from the end: the log ends before the saved head")
	// ErrHeadNotHeld: the log does not hold the saved head, byte for
	// byte, where the head says it is.
	ErrHeadNotHeld = errors.New("the log does not hold the saved head (the chain was rewritten, or the head is of another log)")
	// ErrHeadSignature: the saved head's own signature does not verify
	// against the keys.
	ErrHeadSignature = errors.New("the saved head's signature does not verify against the JWKS")
)

// ErrTornTail: the log ends with part of a record, the mark of a write
// that failed part-way (a full disk, a crash) and was not cut back.
// `airlock evidence repair` (Repair) cuts it off and records the cut.
var ErrTornTail = errors.New("the log ends with an incomplete record (a write that failed part-way)")

// VerifyError says which line breaks the chain and how.
type VerifyError struct {
	// File is the file the line is in, when several were verified as
	// one chain (VerifyFiles); empty for one reader.
	File   string
	Line   int
	Reason string
	// Err is the sentinel of a known cause (ErrTornTail), nil otherwise.
	Err error
}

func (e *VerifyError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s line %d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

func (e *VerifyError) Unwrap() error { return e.Err }

// VerifyOptions are what a verification checks beyond the chain itself.
type VerifyOptions struct {
	// Keys verify checkpoint signatures, by kid (from the host's evidence
	// JWKS). With keys, a log must hold at least one checkpoint (so an
	// empty log fails) and every checkpoint must be signed by one of them.
	Keys map[string]ed25519.PublicKey
	// Head is a checkpoint saved earlier (the host's GET
	// /v1/evidence/head): the log must hold a checkpoint record with
	// exactly its content, which the chain before it must match — so a
	// truncated log, or one cut back to an older checkpoint, fails even
	// without keys. With keys, Head's own signature is checked too.
	Head *Checkpoint
	// HeadHash is a record hash saved earlier (Log.Head): the log
	// must hold a record with that hash.
	HeadHash string
}

// Verified is what a verification established.
type Verified struct {
	// Records is how many records were verified: First to Seq.
	Records int
	// First is the seq of the first record: 1 for a whole log, more for
	// a chain that starts with a later segment (an evidence.segment
	// record); 0 when there is none.
	First uint64
	// Seq is the seq of the last record (0 when there is none).
	Seq         uint64
	Head        string      // hash of the last record
	LogID       string      // the id of the log's first record (from a segment record when the chain starts with one)
	Checkpoints int         // signed checkpoints seen (signatures checked when keys were given)
	Last        *Checkpoint // the latest checkpoint, nil when none
	// Unsigned counts the records after the latest checkpoint: the chain
	// links them, but no signature covers them yet.
	Unsigned int
	// HeadAt is the seq of the record that matched VerifyOptions.Head
	// (the checkpoint record; it covers records 1..Head.Seq) or HeadHash;
	// 0 when neither was given.
	HeadAt int
	// Bytes is the length of the whole, verified records of the last
	// file read: where a torn tail begins.
	Bytes int64
}

// Verify reads a log from the start and checks every record: its
// bytes are exactly what the writer produces (so no second encoding of
// the same record — added whitespace, escapes, CRLF, duplicate or
// case-variant keys — can hide a different meaning), its hash, its link
// to the record before, and consecutive sequence numbers. An edited,
// deleted, inserted or reordered record fails. It returns the number of
// records and the head hash.
func Verify(r io.Reader) (int, string, error) {
	v, err := VerifyWith(r, VerifyOptions{})
	return v.Records, v.Head, err
}

// VerifyWith is Verify with checkpoint signatures checked
// against opts.Keys: a chain rewritten from some record on (every hash
// recomputed) fails at the first checkpoint after it, a forged checkpoint
// fails its signature.
func VerifyWith(r io.Reader, opts VerifyOptions) (Verified, error) {
	if s, ok := r.(io.Seeker); ok {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return Verified{}, err
		}
	}
	c, err := newChain(opts)
	if err != nil {
		return Verified{}, err
	}
	if err := c.read(r, ""); err != nil {
		return c.v, err
	}
	return c.finish()
}

// chain verifies records read from one or more files in turn, as one
// chain.
type chain struct {
	opts VerifyOptions
	v    Verified
}

func newChain(opts VerifyOptions) (*chain, error) {
	if opts.Head != nil && len(opts.Keys) > 0 {
		key, ok := opts.Keys[opts.Head.KeyID]
		if !ok || !opts.Head.verify(key) {
			return nil, ErrHeadSignature
		}
	}
	return &chain{opts: opts, v: Verified{Head: GenesisHash}}, nil
}

// read verifies the records of one file, continuing the chain.
func (c *chain) read(r io.Reader, file string) error {
	br := bufio.NewReaderSize(r, 64<<10)
	c.v.Bytes = 0
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return nil
		}
		fail := func(reason string) error { return &VerifyError{File: file, Line: n, Reason: reason} }
		if err == io.EOF {
			return &VerifyError{File: file, Line: n, Reason: "incomplete last record (no newline): " + ErrTornTail.Error(), Err: ErrTornTail}
		}
		if err != nil {
			return err
		}
		if len(line) > MaxLine {
			return fail("record too long")
		}
		if reason := c.record(strings.TrimSuffix(line, "\n"), file != "" && n == 1); reason != "" {
			return fail(reason)
		}
		c.v.Bytes += int64(len(line))
	}
}

// record checks one line against the chain so far and adds it; it
// returns the reason it fails, or "". fileStart says the line is the
// first of a file after the first.
func (c *chain) record(body string, fileStart bool) string {
	var rec Record
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return "not a valid record"
	}
	canonical, err := json.Marshal(rec)
	if err != nil || !bytes.Equal(canonical, []byte(body)) {
		return "not in the writer's exact encoding (reformatted, re-escaped, a duplicate or case-variant key, or a CR)"
	}
	v := &c.v
	switch {
	case v.Seq == 0 && rec.Seq == 1 && rec.Prev != GenesisHash:
		return "does not link to the record before it"
	case v.Seq == 0 && rec.Seq != 1 && rec.Type != SegmentType:
		return fmt.Sprintf("sequence %d, want 1 (a log starts at record 1, a later segment with an %s record)", rec.Seq, SegmentType)
	case v.Seq > 0 && rec.Seq != v.Seq+1 && fileStart:
		return fmt.Sprintf("sequence %d, want %d: this file does not continue the one before it (a segment is missing, or out of order)", rec.Seq, v.Seq+1)
	case v.Seq > 0 && rec.Seq != v.Seq+1:
		return fmt.Sprintf("sequence %d, want %d (a record was deleted, inserted or moved)", rec.Seq, v.Seq+1)
	case v.Seq > 0 && rec.Prev != v.Head && fileStart:
		return "does not link to the last record of the file before it (that segment was altered, or is not this one's predecessor)"
	case v.Seq > 0 && rec.Prev != v.Head:
		return "does not link to the record before it"
	}
	want, err := hashOf(rec)
	if err != nil || want != rec.Hash {
		return "hash mismatch (the record was edited)"
	}
	if !idDerived(rec) {
		return "id is not derived from the record (ev- and the first 16 hex digits of its hash with the id emptied)"
	}
	if v.Seq == 0 {
		v.First, v.LogID = rec.Seq, rec.ID
	}
	switch rec.Type {
	case SegmentType:
		logID, reason := checkSegment(rec, v.LogID, v.Seq == 0)
		if reason != "" {
			return reason
		}
		v.LogID = logID
	case CheckpointType:
		cp, reason := checkCheckpoint(rec, v.LogID, rec.Prev, rec.Seq-1, c.opts.Keys)
		if reason != "" {
			return reason
		}
		v.Checkpoints++
		v.Last = cp
		v.Unsigned = -1 // the checkpoint record itself is not counted below
		if c.opts.Head != nil && cp.equal(*c.opts.Head) {
			v.HeadAt = int(rec.Seq)
		}
	}
	if c.opts.HeadHash != "" && rec.Hash == c.opts.HeadHash {
		v.HeadAt = int(rec.Seq)
	}
	v.Records++
	v.Seq, v.Head = rec.Seq, rec.Hash
	v.Unsigned++
	return ""
}

// finish checks what only the whole chain can show: with keys, that
// something is signed; a saved head, that it was found.
func (c *chain) finish() (Verified, error) {
	v := c.v
	switch {
	case len(c.opts.Keys) > 0 && v.Records == 0:
		return v, ErrEvidenceEmpty
	case len(c.opts.Keys) > 0 && v.Checkpoints == 0:
		return v, &VerifyError{Line: v.Records, Reason: "no signed checkpoint: nothing authenticates this chain (it may have been rewritten whole)"}
	}
	return v, v.checkHead(c.opts)
}

// idDerived says whether rec's id is the one the writer derives: ev- and
// the first 16 hex digits of the hash of the record with its id (and
// hash) emptied.
func idDerived(rec Record) bool {
	id := rec.ID
	rec.ID = ""
	h, err := hashOf(rec)
	return err == nil && id == "ev-"+h[:16]
}

// checkHead says whether the saved head, if one was given, was found.
func (v Verified) checkHead(opts VerifyOptions) error {
	switch {
	case v.HeadAt > 0 || (opts.Head == nil && opts.HeadHash == ""):
		return nil
	case opts.Head != nil && v.First > opts.Head.Seq+1:
		return fmt.Errorf("%w: the records given start at %d, after the saved head (record %d): include the segment that holds it",
			ErrHeadNotHeld, v.First, opts.Head.Seq+1)
	case opts.Head != nil && v.Seq <= opts.Head.Seq:
		return fmt.Errorf("%w: the log ends at record %d; the head covers records 1-%d and is record %d", ErrHeadTruncated,
			v.Seq, opts.Head.Seq, opts.Head.Seq+1)
	case opts.Head != nil:
		return fmt.Errorf("%w: record %d is not the saved checkpoint of records 1-%d", ErrHeadNotHeld, opts.Head.Seq+1, opts.Head.Seq)
	default:
		return fmt.Errorf("%w: no record of the %d verified has the saved hash (records were removed from the end, the chain was rewritten, or the segment that holds it was not given)",
			ErrHeadNotHeld, v.Records)
	}
}

// checkCheckpoint checks a checkpoint record against the chain before it:
// same log, the head and seq of the record just before, and (with keys)
// a valid signature. It returns the reason it fails, or "".
func checkCheckpoint(rec Record, logID, head string, seq uint64, keys map[string]ed25519.PublicKey) (*Checkpoint, string) {
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(rec.Data))
	dec.DisallowUnknownFields()
	if dec.Decode(&cp) != nil {
		return nil, "checkpoint: not a valid checkpoint"
	}
	// In the writer's exact encoding, so that the signed time is the
	// "time" string as written (the documented format relies on it).
	if b, err := json.Marshal(cp); err != nil || !bytes.Equal(b, rec.Data) {
		return nil, "checkpoint: not in the writer's exact encoding"
	}
	if len(keys) > 0 {
		key, ok := keys[cp.KeyID]
		if !ok {
			return nil, "checkpoint: signed by a key not in the JWKS (forged, or the wrong JWKS)"
		}
		if !cp.verify(key) {
			return nil, "checkpoint: bad signature (forged or edited)"
		}
	}
	switch {
	case cp.LogID != logID:
		return nil, "checkpoint: signed for another log, or the chain was rewritten from its first record"
	case cp.Seq != seq || cp.Head != head:
		return nil, "checkpoint: signs a head the chain before it does not have (records before it were rewritten)"
	}
	return &cp, ""
}
