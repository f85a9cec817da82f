package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// RepairType is the record type Repair writes where it cut an incomplete
// record off a log: data {"cut_bytes": n, "cut_sha256": hex}, so the cut
// stays in the chain, and the bytes removed can be matched against a copy.
const RepairType = "evidence.repair"

// ErrNotRepairable: the log does not verify for a reason other than an
// incomplete last record; Repair does not rewrite a chain.
var ErrNotRepairable = errors.New("only an incomplete last record is repaired")

// Repaired is what Repair did.
type Repaired struct {
	// CutBytes is how many bytes of an incomplete record were cut off;
	// 0 when the log verified and nothing was done.
	CutBytes int64
	// Record is the RepairType record that records the cut.
	Record Record
}

// Repair cuts the incomplete record a failed write left at the end of
// the log at path (a full disk while its cut-back failed too, a crash)
// back to the last whole record, and appends a RepairType record saying
// what was cut; then the log verifies and the host opens it again. A log
// that verifies is left alone; one that fails for any other reason is
// refused (ErrNotRepairable): a break inside the chain is tampering or
// damage to be looked at, not cut. Like Open, it refuses a log that a
// running host holds (ErrInUse).
func Repair(path string) (Repaired, error) {
	f, err := openFile(path)
	if err != nil {
		return Repaired{}, err
	}
	defer f.Close()
	v, err := VerifyWith(f, VerifyOptions{})
	switch {
	case err == nil:
		return Repaired{}, nil
	case !errors.Is(err, ErrTornTail):
		return Repaired{}, fmt.Errorf("%w: the log does not verify for another reason: %w", ErrNotRepairable, err)
	}
	if _, err := f.Seek(v.Bytes, io.SeekStart); err != nil {
		return Repaired{}, err
	}
	h := sha256.New()
	cut, err := io.Copy(h, f)
	if err != nil {
		return Repaired{}, err
	}
	if err := f.Truncate(v.Bytes); err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: %w", err)
	}
	l, err := fromFile(f, path)
	if err != nil {
		return Repaired{}, err
	}
	data, _ := json.Marshal(map[string]any{"cut_bytes": cut, "cut_sha256": hex.EncodeToString(h.Sum(nil))})
	r, err := l.write(Record{Type: RepairType, Data: data})
	if err != nil {
		return Repaired{}, fmt.Errorf("evidence repair: the incomplete record was cut off, but the cut could not be recorded: %w", err)
	}
	return Repaired{CutBytes: cut, Record: r}, nil
}
