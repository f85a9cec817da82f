package evidence_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/host/evidence"
)

// auditorVerify checks a log and its key as docs/evidence.md describes
// them, with code of its own: byte operations on the lines, SHA-256 and
// Ed25519 from the standard library, nothing of package evidence. It returns
// the number of records and of checkpoints.
func auditorVerify(log, jwks []byte) (records, checkpoints int, err error) {
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X string }
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) != 1 {
		return 0, 0, errors.New("jwks: want one key")
	}
	k := set.Keys[0]
	pub, err := base64.RawURLEncoding.DecodeString(k.X)
	if err != nil || k.Kty != "OKP" || k.Crv != "Ed25519" || len(pub) != ed25519.PublicKeySize {
		return 0, 0, errors.New("jwks: not an Ed25519 key")
	}
	if sum := sha256.Sum256(pub); base64.RawURLEncoding.EncodeToString(sum[:12]) != k.Kid {
		return 0, 0, errors.New("jwks: kid is not the key's")
	}
	if len(log) == 0 || log[len(log)-1] != '\n' {
		return 0, 0, errors.New("empty, or the last line has no LF")
	}
	hashSuffix := regexp.MustCompile(`,"hash":"([0-9a-f]{64})"}$`)
	idPrefix := regexp.MustCompile(`^\{"seq":([1-9][0-9]*),"id":"ev-([0-9a-f]{16})",`)
	prevRe := regexp.MustCompile(`,"prev":"([0-9a-f]{64})"$`)
	prev, firstID := string(bytes.Repeat([]byte("0"), 64)), ""
	for n, line := range bytes.Split(log[:len(log)-1], []byte("\n")) {
		seq := n + 1
		m := hashSuffix.FindSubmatchIndex(line)
		if m == nil {
			return 0, 0, fmt.Errorf("line %d: no hash suffix", seq)
		}
		hash := string(line[m[2]:m[3]])
		b := append(append([]byte(nil), line[:m[0]]...), '}')
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hash {
			return 0, 0, fmt.Errorf("line %d: hash", seq)
		}
		p := idPrefix.FindSubmatch(b)
		if p == nil || string(p[1]) != strconv.Itoa(seq) {
			return 0, 0, fmt.Errorf("line %d: seq or id", seq)
		}
		id := "ev-" + string(p[2])
		bID := append([]byte(`{"seq":`+string(p[1])+`,"id":"",`), b[len(p[0]):]...)
		if sum := sha256.Sum256(bID); "ev-"+hex.EncodeToString(sum[:])[:16] != id {
			return 0, 0, fmt.Errorf("line %d: id", seq)
		}
		if seq == 1 {
			firstID = id
		}
		if pm := prevRe.FindSubmatch(line[:m[0]]); pm == nil || string(pm[1]) != prev {
			return 0, 0, fmt.Errorf("line %d: prev", seq)
		}
		var rec struct {
			Type string
			Data json.RawMessage
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return 0, 0, fmt.Errorf("line %d: JSON", seq)
		}
		if rec.Type == "evidence.checkpoint" {
			var cp struct {
				LogID string `json:"log_id"`
				Seq   int    `json:"seq"`
				Head  string `json:"head"`
				Time  string `json:"time"`
				Kid   string `json:"kid"`
				Sig   string `json:"sig"`
			}
			if err := json.Unmarshal(rec.Data, &cp); err != nil {
				return 0, 0, fmt.Errorf("line %d: checkpoint JSON", seq)
			}
			if cp.LogID != firstID || cp.Seq != seq-1 || cp.Head != prev || cp.Kid != k.Kid {
				return 0, 0, fmt.Errorf("line %d: checkpoint does not match the chain", seq)
			}
			input := "airlock-evidence-checkpoint/v1\n" + cp.LogID + "\n" + strconv.Itoa(cp.Seq) + "\n" + cp.Head + "\n" + cp.Time
			sig, err := base64.RawURLEncoding.DecodeString(cp.Sig)
			if err != nil || !ed25519.Verify(pub, []byte(input), sig) {
				return 0, 0, fmt.Errorf("line %d: checkpoint signature", seq)
			}
			checkpoints++
		}
		prev, records = hash, seq
	}
	return records, checkpoints, nil
}

// The documented checkpoint format is enough to verify a log with
// independent code; the same code rejects a flipped bit in a signature,
// a checkpoint time and a record.
func TestEvidenceFormatAsDocumented(t *testing.T) {
	dir := t.TempDir()
	key, err := evidence.LoadKey(filepath.Join(dir, "evidence-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "evidence.jsonl")
	l, err := evidence.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range []string{`{"method":"a.b","note":"<&>"}`, ``, `{"i":3}`, `[1,2]`, `"x"`} {
		if _, err := l.Append(evidence.Record{Type: "invocation.start", Plugin: "p", Invocation: strconv.Itoa(i), Data: json.RawMessage(data)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if _, err := l.Checkpoint(key); err != nil {
				t.Fatal(err)
			}
		}
	}
	head, err := l.Checkpoint(key)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	records, checkpoints, err := auditorVerify(b, key.JWKS())
	if err != nil || records != 8 || checkpoints != 3 {
		t.Fatalf("independent verifier: %d records, %d checkpoints, %v", records, checkpoints, err)
	}
	// The head the host serves is the last checkpoint's data, byte for byte.
	served, _ := json.Marshal(head)
	if !bytes.Contains(b, append(append([]byte(`"data":`), served...), ',')) {
		t.Fatal("the head is not byte-identical to the last checkpoint's data")
	}
	for _, at := range []string{`"sig":"`, `","kid"`, `"i":3`} {
		i := bytes.LastIndex(b, []byte(at))
		if at == `","kid"` {
			i-- // the last digit of the checkpoint's time
		} else {
			i += len(at)
		}
		c := append([]byte(nil), b...)
		c[i] ^= 1
		if _, _, err := auditorVerify(c, key.JWKS()); err == nil {
			t.Errorf("a flipped bit near %s passed the independent verifier", at)
		}
	}
}
