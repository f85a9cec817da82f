package evidence

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// What an auditor relies on, each case reported against the old
// verifier: a saved head is matched by its whole content, not its
// signature; a log cut back before a saved head fails; an empty log does
// not pass with keys; a checkpoint not in the writer's encoding fails.
func TestEvidenceAuditorChecks(t *testing.T) {
	lines, key, last := tamperLog(t) // r1 r2 r3 cp4 r5 r6 r7 cp8; last is cp8
	keys := map[string]ed25519.PublicKey{key.ID: key.priv.Public().(ed25519.PublicKey)}
	var older Checkpoint // cp4
	var rec Record
	_ = json.Unmarshal([]byte(lines[3]), &rec)
	_ = json.Unmarshal(rec.Data, &older)
	verify := func(ls []string, opts VerifyOptions) (Verified, error) {
		body := strings.Join(ls, "\n")
		if len(ls) > 0 {
			body += "\n"
		}
		return VerifyWith(strings.NewReader(body), opts)
	}
	// madeUp appends to ls a checkpoint of the chain so far that copies
	// cp's kid, time and signature: all an attacker without the key has.
	madeUp := func(ls []string, cp Checkpoint) []string {
		var r Record
		_ = json.Unmarshal([]byte(ls[len(ls)-1]), &r)
		var first Record
		_ = json.Unmarshal([]byte(ls[0]), &first)
		fake := cp
		fake.LogID, fake.Seq, fake.Head = first.ID, r.Seq, r.Hash
		data, _ := json.Marshal(fake)
		b, _ := json.Marshal(Record{Seq: r.Seq + 1, Time: r.Time, Type: CheckpointType, Data: data})
		return rechain(t, append(append([]string(nil), ls...), string(b)))
	}
	otherTime := func(ls []string, i int) []string {
		c := append([]string(nil), ls...)
		c[i] = strings.Replace(c[i], `Z","kid"`, `+00:00","kid"`, 1)
		return rechain(t, c)
	}
	// Cut back to cp4, then records 5-7 of other content.
	refilled := append([]string(nil), lines[:7]...)
	for i := 4; i < 7; i++ {
		refilled[i] = flipBit(refilled[i], strings.Index(refilled[i], `"i":`)+4)
	}
	refilled = rechain(t, refilled)
	forged := *last
	forged.Sig = flipBit(forged.Sig, 3)

	for _, tt := range []struct {
		name    string
		lines   []string
		opts    VerifyOptions
		wantErr error
		headAt  int
	}{
		{name: "intact, saved head, no keys", lines: lines, opts: VerifyOptions{Head: last}, headAt: 8},
		{name: "intact, older saved head", lines: lines, opts: VerifyOptions{Keys: keys, Head: &older}, headAt: 4},
		{name: "intact, saved record hash", lines: lines, opts: VerifyOptions{HeadHash: older.Head}, headAt: 3},
		{name: "truncated, made-up checkpoint copying the head's signature, no keys", lines: madeUp(lines[:5], *last),
			opts: VerifyOptions{Head: last}, wantErr: ErrHeadTruncated},
		{name: "cut back to the older checkpoint, newer saved head", lines: lines[:4],
			opts: VerifyOptions{Head: last}, wantErr: ErrHeadTruncated},
		{name: "cut back, refilled to the head's length with a made-up checkpoint", lines: madeUp(refilled, *last),
			opts: VerifyOptions{Head: last}, wantErr: ErrHeadNotHeld},
		{name: "saved head with a forged signature", lines: lines, opts: VerifyOptions{Keys: keys, Head: &forged}, wantErr: ErrHeadSignature},
		{name: "saved hash not in the log", lines: lines[:2], opts: VerifyOptions{HeadHash: older.Head}, wantErr: ErrHeadNotHeld},
		{name: "empty log with keys", lines: nil, opts: VerifyOptions{Keys: keys}, wantErr: ErrEvidenceEmpty},
		{name: "empty log without keys", lines: nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := verify(tt.lines, tt.opts)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err == nil && v.HeadAt != tt.headAt {
				t.Fatalf("head found at record %d, want %d", v.HeadAt, tt.headAt)
			}
		})
	}

	// The checkpoint's time in another spelling of the same instant: its
	// data is no longer what the writer writes, and what an auditor's
	// own code (docs/evidence.md) would sign differs from what was signed.
	_, err := verify(otherTime(lines, 3), VerifyOptions{})
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Line != 4 || !strings.Contains(ve.Reason, "exact encoding") {
		t.Fatalf("checkpoint time respelled: %v", err)
	}

	// Records after the last checkpoint are counted, for the report.
	l, err := Open(filepath.Join(t.TempDir(), "e.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		if _, err := l.Append(Record{Type: "invocation.start"}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := VerifyWith(l.f, VerifyOptions{})
	if err != nil || v.Unsigned != 3 || v.Last != nil {
		t.Fatalf("unsigned tail: %+v %v", v, err)
	}
}
