//go:build linux

package evidence

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// damagedLog is a log whose whole records take a little less than a
// whole number of pages (so that one more record needs a new page),
// damaged as a failed write leaves it: with the remains of one (a host
// before this release's) in front of record 3, or, torn, with an
// incomplete last record (a crash mid-write). It returns the damaged
// bytes, the length of the whole records and of what a repair cuts.
func damagedLog(t *testing.T, torn bool) ([]byte, int, int) {
	t.Helper()
	build := func(pad int) []byte {
		p := filepath.Join(t.TempDir(), "evidence.jsonl")
		l, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		data := json.RawMessage(`{"x":"` + strings.Repeat("y", pad) + `"}`)
		if _, err := l.Append(Record{Type: "invocation.start", Plugin: "p", Data: data}); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 4)
		l.Close()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const page, slack = 4096, 100 // a record is longer than the slack
	b := build(0)
	b = build((2*page - slack - len(b)%page) % page)
	if room := page - len(b)%page; room > 2*slack || room == page {
		t.Fatalf("the log takes %d bytes: %d left in its last page", len(b), room)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if torn {
		tail := lines[2][:30] // within the last page
		return append(append([]byte(nil), b...), tail...), len(b), len(tail)
	}
	remains := lines[2][:60]
	damaged := bytes.Join([][]byte{lines[0], lines[1], remains, bytes.Join(lines[2:], nil)}, nil)
	return damaged, len(b), len(remains)
}

// A repair on a disk with room for the rewritten log but not for the
// record of the cut changes nothing: the cut is made and recorded in one
// step, or not at all (a cut made without its record could never be
// recorded later: the log would verify, and a second repair find nothing
// to do). Once there is room, the repair makes and records the cut.
func TestRepairOnAFullDiskCutsNothingUnrecorded(t *testing.T) {
	t.Run("remains", func(t *testing.T) { testRepairOnAFullDisk(t, false) })
	t.Run("torn tail", func(t *testing.T) { testRepairOnAFullDisk(t, true) })
}

func testRepairOnAFullDisk(t *testing.T, torn bool) {
	damaged, whole, cut := damagedLog(t, torn)
	mnt := testenv.SmallDisk(t, 256<<10)
	p := filepath.Join(mnt, "evidence.jsonl")
	if err := os.WriteFile(p, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	// Remains: room for the rewritten log's pages, and no more. A torn
	// tail: no room at all (cutting it frees none: it ends in the last
	// page).
	room := int64((whole + 4095) / 4096 * 4096)
	if torn {
		room = 0
	}
	filler := filepath.Join(mnt, "filler")
	testenv.FillDiskLeaving(t, filler, room)
	if _, err := Repair(p); err == nil {
		t.Fatal("the repair reported success on a disk without room for its record")
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, damaged) {
		_, verr := VerifyFiles([]string{p}, VerifyOptions{})
		t.Fatalf("a repair that failed changed the log: %d bytes, verifies: %v (a cut with no record of it)", len(got), verr == nil)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(mnt, ".*repair*")); len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	if err := os.Remove(filler); err != nil { // room again
		t.Fatal(err)
	}
	res, err := Repair(p)
	if err != nil || res.CutBytes != int64(cut) || res.Record.Type != RepairType {
		t.Fatalf("the repair with room: %+v %v", res, err)
	}
	if v := verifyFile(t, p, VerifyOptions{}); v.Records != 6 {
		t.Fatalf("after the repair: %+v", v)
	}
}
