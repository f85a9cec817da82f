package evidence

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// RepairType is the record type Repair writes where it cut the remains
// of failed writes out of a log: data {"cut_bytes": n, "cut_sha256": hex,
// "before": [seq, …]}, so the cut stays in the chain and the bytes
// removed can be matched against a copy. before lists the records whose
// line began with cut remains (none for a cut tail).
const RepairType = "evidence.repair"

// ErrNotRepairable: the log does not verify for a reason other than the
// remains of failed writes; Repair does not rewrite a chain.
var ErrNotRepairable = errors.New("only the remains of failed writes are repaired")

// Repaired is what Repair did.
type Repaired struct {
	// CutBytes is how many bytes of failed writes were cut; 0 when the
	// log verified and nothing was done.
	CutBytes int64
	// Before lists the records whose line began with remains that were
	// cut (none when only an incomplete last record was).
	Before []uint64
	// Record is the RepairType record that records the cut.
	Record Record
}

// repairData is the data of a RepairType record.
type repairData struct {
	CutBytes  int64    `json:"cut_bytes"`
	CutSHA256 string   `json:"cut_sha256"`
	Before    []uint64 `json:"before,omitempty"`
}

// Repair cuts the remains of failed writes out of the log at path, and
// appends a RepairType record saying what was cut; then the log
// verifies and the host opens it again. Two kinds of remains are cut:
// an incomplete last record (a crash mid-write, or a failed write whose
// cut-back failed too), cut off the end; and the parts of failed records
// that a host before this release left on a line, in front of the next
// record it wrote (each is a prefix of that record's seq, so the record
// itself, and every checkpoint, still verifies once they are gone). The
// file is rewritten beside itself with the record at its end and renamed
// over, keeping its owner and mode 0600, so the cut lands with its
// record or not at all: a repair that fails (no room for the copy, a
// crash) leaves the log as it was. A log that verifies is left alone; one that
// breaks in any other way is refused (ErrNotRepairable): a break inside
// the chain is tampering or damage to be looked at, not cut. Like Open,
// it refuses a log that a running host holds (ErrInUse).
func Repair(path string) (Repaired, error) {
	f, err := openFile(path)
	if err != nil {
		return Repaired{}, err
	}
	defer f.Close()
	_, err = VerifyWith(f, VerifyOptions{})
	var ve *VerifyError
	switch {
	case err == nil:
		return Repaired{}, nil
	case !errors.Is(err, ErrTornTail) && !errors.As(err, &ve):
		return Repaired{}, err
	}
	// Even a torn tail is cut by rewriting the log, not by truncating it
	// in place: the cut and its record must land together.
	return cutRemains(f, path)
}

// cutRemains rewrites the log without the remains of failed records in
// front of the records that followed them and without a torn tail, with
// the record of the cut at its end, beside itself, and renames it over
// the log: the cut is made with its record or not at all. It needs room
// for a copy of the log.
func cutRemains(f *os.File, path string) (Repaired, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Repaired{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".repair-*")
	if err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	defer tmp.Close()
	c, _ := newChain(VerifyOptions{})
	h := sha256.New()
	var d repairData
	br := bufio.NewReaderSize(f, 64<<10)
	bw := bufio.NewWriterSize(tmp, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err == io.EOF { // and a torn tail
			d.CutBytes += int64(len(line))
			h.Write([]byte(line))
			break
		}
		if err != nil {
			return Repaired{}, err
		}
		body := strings.TrimSuffix(line, "\n")
		if reason := c.record(body, false); reason != "" {
			// The remains of failed writes of record seq are prefixes of
			// it, each beginning as it does; the record is the last.
			seq := c.v.Seq + 1
			i := strings.LastIndex(body, fmt.Sprintf(`{"seq":%d,"id":"ev-`, seq))
			if i <= 0 || c.record(body[i:], false) != "" {
				return Repaired{}, fmt.Errorf("%w: %w", ErrNotRepairable, &VerifyError{Line: n, Reason: reason})
			}
			d.CutBytes += int64(i)
			d.Before = append(d.Before, seq)
			h.Write([]byte(body[:i]))
			body = body[i:]
		}
		bw.WriteString(body)
		bw.WriteByte('\n')
	}
	d.CutSHA256 = hex.EncodeToString(h.Sum(nil))
	if err := bw.Flush(); err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: %w", err)
	}
	if err := keepOwner(tmp, f); err != nil {
		return Repaired{}, err
	}
	// The record of the cut goes in before the rewritten log replaces
	// the old one (it is synced with it): a cut is made together with
	// its record, or not at all. Once made, the log verifies, and a cut
	// left unrecorded (a full disk, a crash) could never be recorded.
	res, err := recordRepair(tmp, path, d)
	if err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: nothing was cut: the cut could not be recorded: %w", err)
	}
	// The lock moves with the name: take the new file's before it
	// replaces the old one.
	if err := fsutil.TryLock(tmp); err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: %w", err)
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync()
		dir.Close()
	}
	return res, nil
}

// keepOwner gives tmp the owner of f, and mode 0600: a repair run as root
// must not take the log from the host's user.
func keepOwner(tmp, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("evidence repair: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		if err := tmp.Chown(int(sys.Uid), int(sys.Gid)); err != nil {
			return fmt.Errorf("evidence repair: %w", err)
		}
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("evidence repair: %w", err)
	}
	return nil
}

// recordRepair appends the RepairType record to the verified log in f.
func recordRepair(f *os.File, path string, d repairData) (Repaired, error) {
	l, err := fromFile(f, path)
	if err != nil {
		return Repaired{}, err
	}
	if l.size == 0 {
		// All that was cut was the start of a segment (a host killed
		// while it wrote the segment record): the cut is recorded in
		// the chain that segment continues, as Open would go on.
		pf, prev, err := previousSegment(path)
		if err == nil && pf != nil {
			err = l.follow(pf, prev)
			pf.Close()
		}
		if err == nil && l.segmentDue {
			err = l.writeSegment()
		}
		if err != nil {
			return Repaired{}, err
		}
	}
	data, _ := json.Marshal(d)
	r, err := l.write(Record{Type: RepairType, Data: data})
	if err != nil {
		return Repaired{}, err
	}
	return Repaired{CutBytes: d.CutBytes, Before: d.Before, Record: r}, nil
}
