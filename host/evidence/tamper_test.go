package evidence

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tamperLog writes 6 records with checkpoints after the 3rd and the 6th
// and returns its lines (without newlines), the key and the last checkpoint.
func tamperLog(t *testing.T) ([]string, *Key, *Checkpoint) {
	t.Helper()
	dir := t.TempDir()
	key, err := LoadKey(filepath.Join(dir, "evidence-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "evidence.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var last *Checkpoint
	for i := 0; i < 6; i++ {
		if _, err := l.Append(Record{Type: "invocation.start", Plugin: "p", Data: json.RawMessage(`{"method":"a.b","i":` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
		if i == 2 || i == 5 {
			if last, err = l.Checkpoint(key); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.Close()
	b, _ := os.ReadFile(p)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), key, last
}

// rechain recomputes every seq, prev, id and hash the way the writer does:
// what an attacker without the checkpoint key can do.
func rechain(t *testing.T, lines []string) []string {
	t.Helper()
	prev := GenesisHash
	out := make([]string, len(lines))
	for i, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		r.Seq, r.Prev, r.ID, r.Hash = uint64(i+1), prev, "", ""
		h, _ := hashOf(r)
		r.ID = "ev-" + h[:16]
		r.Hash, _ = hashOf(r)
		b, _ := json.Marshal(r)
		out[i], prev = string(b), r.Hash
	}
	return out
}

func flipBit(s string, i int) string {
	b := []byte(s)
	b[i] ^= 1
	return string(b)
}

// The tamper suite: every way to alter a log that was reported against
// the old verifier, each detected with the line and the reason.
func TestEvidenceTamperSuite(t *testing.T) {
	lines, key, last := tamperLog(t)
	keys := map[string]ed25519.PublicKey{key.ID: key.priv.Public().(ed25519.PublicKey)}
	verify := func(ls []string, withKeys bool) (Verified, error) {
		opts := VerifyOptions{}
		if withKeys {
			opts.Keys = keys
		}
		return VerifyWith(strings.NewReader(strings.Join(ls, "\n")+"\n"), opts)
	}
	if v, err := VerifyWith(strings.NewReader(strings.Join(lines, "\n")+"\n"), VerifyOptions{Keys: keys, Head: last}); err != nil ||
		v.Records != 8 || v.Checkpoints != 2 || v.Unsigned != 0 || v.HeadAt != 8 {
		t.Fatalf("intact log: %+v %v", v, err)
	}
	edit := func(f func(c []string) []string) []string { return f(append([]string(nil), lines...)) }
	other, _ := LoadKey(filepath.Join(t.TempDir(), "k.pem"))
	for _, tt := range []struct {
		name     string
		lines    []string
		withKeys bool
		line     int
		reason   string
	}{
		{"byte edit", edit(func(c []string) []string {
			c[1] = flipBit(c[1], strings.Index(c[1], `"i":1`)+4) // the digit 1 becomes 0
			return c
		}), false, 2, "hash mismatch"},
		{"deletion", edit(func(c []string) []string { return append(c[:2], c[3:]...) }), false, 3, "sequence 4, want 3"},
		{"reorder", edit(func(c []string) []string { c[1], c[2] = c[2], c[1]; return c }), false, 2, "sequence 3, want 2"},
		{"duplication", edit(func(c []string) []string { return append(c[:2], append([]string{c[1]}, c[2:]...)...) }), false, 3, "sequence 2, want 3"},
		{"whitespace", edit(func(c []string) []string { c[2] = strings.Replace(c[2], `"seq":`, `"seq": `, 1); return c }), false, 3, "exact encoding"},
		{"escape", edit(func(c []string) []string {
			c[2] = strings.Replace(c[2], `invocation.start`, `invocation\u002estart`, 1)
			return c
		}), false, 3, "exact encoding"},
		{"CRLF", edit(func(c []string) []string { c[0] += "\r"; return c }), false, 1, "exact encoding"},
		{"duplicate key first", edit(func(c []string) []string {
			c[1] = `{"type":"invocation.outcome",` + strings.TrimPrefix(c[1], "{")
			return c
		}), false, 2, "exact encoding"},
		{"case-variant key", edit(func(c []string) []string {
			c[1] = strings.Replace(c[1], `"type":"invocation.start"`, `"type":"invocation.start","TYPE":"invocation.outcome"`, 1)
			return c
		}), false, 2, "exact encoding"},
		{"full rechain, checkpoints kept", rechain(t, edit(func(c []string) []string {
			c[1] = strings.Replace(c[1], `"i":1`, `"i":7`, 1)
			return c
		})), true, 4, "signs a head the chain before it does not have"},
		{"full rechain, checkpoints dropped", rechain(t, edit(func(c []string) []string {
			return []string{c[0], strings.Replace(c[1], `"i":1`, `"i":7`, 1), c[2], c[4], c[5], c[6]}
		})), true, 6, "no signed checkpoint"},
		{"forged checkpoint", rechain(t, edit(func(c []string) []string {
			var r Record
			_ = json.Unmarshal([]byte(c[3]), &r)
			var cp Checkpoint
			_ = json.Unmarshal(r.Data, &cp)
			cp.KeyID = other.ID // signed with the attacker's own key
			r.Data, _ = json.Marshal(cp)
			b, _ := json.Marshal(r)
			c[3] = string(b)
			return c
		})), true, 4, "signed by a key not in the JWKS"},
		{"id not derived (tail record, hash and link recomputed)", edit(func(c []string) []string {
			var r Record
			_ = json.Unmarshal([]byte(c[7]), &r)
			r.ID = flipBit(r.ID, len(r.ID)-1) // one hex digit of the id changed
			r.Hash, _ = hashOf(r)
			b, _ := json.Marshal(r)
			c[7] = string(b)
			return c
		}), false, 8, "id is not derived from the record"},
		{"edited checkpoint signature", rechain(t, edit(func(c []string) []string {
			c[3] = strings.Replace(c[3], `"sig":"`, `"sig":"A`, 1)
			return c
		})), true, 4, "bad signature"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify(tt.lines, tt.withKeys)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Line != tt.line || !strings.Contains(ve.Reason, tt.reason) {
				t.Fatalf("got %v, want line %d: %s", err, tt.line, tt.reason)
			}
		})
	}
	// Truncation keeps a valid chain; the published checkpoint catches it.
	if _, err := VerifyWith(strings.NewReader(strings.Join(lines[:5], "\n")+"\n"), VerifyOptions{Keys: keys, Head: last}); !errors.Is(err, ErrHeadTruncated) ||
		!strings.Contains(err.Error(), "removed from the end") {
		t.Fatalf("truncation: %v", err)
	}
}

// BenchmarkEvidenceAppend is one fsync'd record; BenchmarkEvidenceCheckpoint
// one signed checkpoint (written once a minute, never per record).
func BenchmarkEvidenceAppend(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "e.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := Record{Type: "invocation.start", Plugin: "p", Data: json.RawMessage(`{"method":"numinance.ports.tickets.v1.Tickets/ListTickets"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvidenceCheckpoint(b *testing.B) {
	dir := b.TempDir()
	key, _ := LoadKey(filepath.Join(dir, "k.pem"))
	l, err := Open(filepath.Join(dir, "e.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := Record{Type: "invocation.start", Plugin: "p"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Checkpoint(key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvidenceVerify is verification per record, with checkpoints.
func BenchmarkEvidenceVerify(b *testing.B) {
	dir := b.TempDir()
	key, _ := LoadKey(filepath.Join(dir, "k.pem"))
	p := filepath.Join(dir, "e.jsonl")
	l, _ := Open(p)
	for i := 0; i < 1000; i++ {
		l.Append(Record{Type: "invocation.start", Plugin: "p", Data: json.RawMessage(`{"i":1}`)})
		if i%100 == 99 {
			l.Checkpoint(key)
		}
	}
	l.Close()
	keys := map[string]ed25519.PublicKey{key.ID: key.priv.Public().(ed25519.PublicKey)}
	b.ReportAllocs()
	for b.Loop() {
		f, _ := os.Open(p)
		if _, err := VerifyWith(f, VerifyOptions{Keys: keys}); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
