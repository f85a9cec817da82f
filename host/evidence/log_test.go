package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

func writeLog(t *testing.T, n int) (string, []string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Append(Record{Type: "lifecycle.launch", Plugin: "p", Data: json.RawMessage(`{"i": ` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	b, _ := os.ReadFile(p)
	return p, strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

func verifyLines(lines []string) error {
	_, _, err := Verify(strings.NewReader(strings.Join(lines, "") + "\n"))
	return err
}

func TestEvidenceChain(t *testing.T) {
	p, lines := writeLog(t, 5)
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\n") + "\n"
	}
	lines[len(lines)-1] = strings.TrimSuffix(lines[len(lines)-1], "\n")
	if err := verifyLines(lines); err != nil {
		t.Fatalf("intact log: %v", err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	tamper := func(f func([]string) []string) []string {
		c := append([]string(nil), lines...)
		for i := range c[:len(c)-1] {
			c[i] = strings.TrimSuffix(c[i], "\n") + "\n"
		}
		return f(c)
	}
	tests := []struct {
		name     string
		lines    []string
		wantLine int
	}{
		{"edited data", tamper(func(c []string) []string { c[2] = strings.Replace(c[2], `"i":2`, `"i":9`, 1); return c }), 3},
		{"edited type", tamper(func(c []string) []string {
			c[1] = strings.Replace(c[1], "lifecycle.launch", "lifecycle.crash!", 1)
			return c
		}), 2},
		{"deleted middle", tamper(func(c []string) []string { return append(c[:2], c[3:]...) }), 3},
		{"deleted first", tamper(func(c []string) []string { return c[1:] }), 1},
		{"reordered", tamper(func(c []string) []string { c[1], c[2] = c[2], c[1]; return c }), 2},
		{"duplicated", tamper(func(c []string) []string { return append(c[:3], append([]string{c[2]}, c[3:]...)...) }), 4},
		{"not JSON", tamper(func(c []string) []string { c[0] = "garbage\n"; return c }), 1},
		{"extra field", tamper(func(c []string) []string { c[0] = strings.Replace(c[0], `{"seq"`, `{"x":1,"seq"`, 1); return c }), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verifyLines(tt.lines)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Line != tt.wantLine {
				t.Fatalf("err = %v, want a failure at line %d", err, tt.wantLine)
			}
		})
	}
}

func TestEvidenceReopenContinuesChain(t *testing.T) {
	p, _ := writeLog(t, 3)
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Append(Record{Type: "lifecycle.shutdown"})
	if err != nil || r.Seq != 4 {
		t.Fatalf("append after reopen: %+v %v", r, err)
	}
	head := l.Head()
	l.Close()
	f, _ := os.Open(p)
	defer f.Close()
	n, h, err := Verify(f)
	if err != nil || n != 4 || h != head {
		t.Fatalf("verify: n=%d head=%s err=%v", n, h, err)
	}
	// A tampered file is not extended.
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte("lifecycle.shutdown"), []byte("lifecycle.shutdowN"), 1), 0o600)
	if _, err := Open(p); err == nil {
		t.Fatal("opened a tampered log for appending")
	}
}

func TestEvidenceIncompleteTail(t *testing.T) {
	p, _ := writeLog(t, 2)
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":3,"id":"ev-x"`)
	f.Close()
	r, _ := os.Open(p)
	defer r.Close()
	if _, _, err := Verify(r); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("torn write: %v", err)
	}
}

// One writer per log: a second open (another process, or a forgotten
// handle) is refused with a clear error instead of forking the chain.
func TestEvidenceLogSingleWriter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); !errors.Is(err, ErrInUse) {
		t.Fatalf("second writer: %v", err)
	}
	l.Close()
	l2, err := Open(p)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	l2.Close()
}

// A link where the log goes would have the host (or root running a repair
// or an install) create or append to a file of its planter's choosing.
func TestEvidenceLogRefusesALink(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "not-yet")
	p := filepath.Join(dir, "evidence.jsonl")
	if err := os.Symlink(elsewhere, p); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(p); !errors.Is(err, fsutil.ErrPlanted) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("a link as the evidence log: %v", err)
	}
	if _, err := Repair(p); !errors.Is(err, fsutil.ErrPlanted) {
		t.Fatalf("a link repaired as the evidence log: %v", err)
	}
	if _, err := os.Lstat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was made: %v", err)
	}
}

// A checkpoint key in a directory another user may write to could be one
// they know: neither read nor made there.
func TestEvidenceKeyRefusesADirectoryOthersMayWrite(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadKey(filepath.Join(dir, "evidence-key.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"evidence-key.pem", "new-key.pem"} {
		if _, err := LoadKey(filepath.Join(dir, name)); !errors.Is(err, fsutil.ErrPlanted) {
			t.Fatalf("%s in a directory anyone may write to: %v", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "new-key.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key was made: %v", err)
	}
}

// A log others may write (copied in, chmodded) could be rewritten by
// them: it is refused, not continued.
func TestEvidenceLogRefusesAFileOthersMayWrite(t *testing.T) {
	p, _ := writeLog(t, 2)
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(p); !errors.Is(err, fsutil.ErrPlanted) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("a log anyone may write: %v", err)
	}
}
