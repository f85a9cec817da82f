package evidence

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// SegmentType is the record type that begins every segment of a log but
// the first: when the log's file was renamed away (rotated), the host
// writes the next records to a new file at the log's path, and the first
// of them is this record, carrying on the chain (its seq and prev follow
// the last record of the segment before) and naming the log (data
// {"log_id": …}). A segment can so be verified alone, from its first
// record, and the segments of a log together as one chain.
const SegmentType = "evidence.segment"

// segment is the data of a SegmentType record.
type segment struct {
	LogID string `json:"log_id"`
}

// checkSegment checks a segment record: its data in the writer's exact
// encoding, and naming this log (or, when the chain starts with it,
// naming the log for what follows). It returns the log id and the reason
// it fails, or "".
func checkSegment(rec Record, logID string, first bool) (string, string) {
	var s segment
	dec := json.NewDecoder(bytes.NewReader(rec.Data))
	dec.DisallowUnknownFields()
	if dec.Decode(&s) != nil || s.LogID == "" {
		return "", "segment: not a valid segment record"
	}
	if b, err := json.Marshal(s); err != nil || !bytes.Equal(b, rec.Data) {
		return "", "segment: not in the writer's exact encoding"
	}
	switch {
	case rec.Seq == 1:
		return "", "segment: a log's first record cannot continue another"
	case !first && s.LogID != logID:
		return "", "segment: names another log (a segment of another log was put in this chain)"
	}
	return s.LogID, ""
}

// VerifyFiles verifies the segments of a log (a rotated log's files, in
// any order) as one chain: they are ordered by their first record's seq,
// and each must continue the one before it, so a missing, altered or
// duplicated segment fails. The first may begin the log or be a later
// segment (rotated-out segments removed); opts apply to the whole chain.
// A gzip-compressed segment (logrotate's compress) is read uncompressed.
func VerifyFiles(paths []string, opts VerifyOptions) (Verified, error) {
	if len(paths) == 0 {
		return Verified{}, errors.New("no evidence file given")
	}
	type seg struct {
		path  string
		first uint64
	}
	segs := make([]seg, 0, len(paths))
	for _, p := range paths {
		first, err := firstSeq(p)
		if err != nil {
			return Verified{}, err
		}
		segs = append(segs, seg{p, first})
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	for i := 1; i < len(segs); i++ {
		if segs[i].first == segs[i-1].first {
			return Verified{}, fmt.Errorf("%s and %s both begin at record %d: one segment given twice, or two logs", segs[i-1].path, segs[i].path, segs[i].first)
		}
	}
	c, err := newChain(opts)
	if err != nil {
		return Verified{}, err
	}
	name := func(p string) string {
		if len(paths) == 1 {
			return "" // one file: lines as Verify names them
		}
		return p
	}
	for _, s := range segs {
		err := readSegment(s.path, func(r io.Reader) error { return c.read(r, name(s.path)) })
		if err != nil {
			return c.v, err
		}
	}
	return c.finish()
}

// readSegment opens a segment file for read, gunzipping one that
// logrotate compressed.
func readSegment(path string, read func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return readSegmentFrom(f, path, read)
}

// readSegmentFrom is readSegment on a file already open.
func readSegmentFrom(f io.Reader, path string, read func(io.Reader) error) error {
	br := bufio.NewReaderSize(f, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		return read(zr)
	}
	return read(br)
}

// firstSeq reads the seq of a file's first record (0 for an empty file
// or one whose first line is not a record: verification then says why).
func firstSeq(path string) (uint64, error) {
	var seq uint64
	err := readSegment(path, func(r io.Reader) error {
		line, err := bufio.NewReaderSize(r, 64<<10).ReadSlice('\n')
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		seq = seqOf(line)
		return nil
	})
	return seq, err
}

// logIDOf is the id of the log whose first record, or segment record,
// is on line ("" when it is neither).
func logIDOf(line []byte) string {
	var rec Record
	if json.Unmarshal(line, &rec) != nil {
		return ""
	}
	var s segment
	switch {
	case rec.Type == SegmentType && json.Unmarshal(rec.Data, &s) == nil:
		return s.LogID
	case rec.Seq == 1:
		return rec.ID
	}
	return ""
}

// seqOf is the seq of the record on line (0 when it is not a record).
func seqOf(line []byte) uint64 {
	var rec struct {
		Seq uint64 `json:"seq"`
	}
	if json.Unmarshal(line, &rec) != nil {
		return 0
	}
	return rec.Seq
}
