package broker

import (
	"crypto/rand"
	"math/big"
	"regexp"
	"strings"
	"testing"
)

var handleRE = regexp.MustCompile(`^alh_[0-9A-Za-z]{49}$`)

func TestHandleFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		h, k, err := newHandle()
		if err != nil {
			t.Fatal(err)
		}
		if !handleRE.MatchString(h) {
			t.Fatalf("handle %q does not match the documented pattern", h)
		}
		if seen[h] {
			t.Fatal("duplicate handle")
		}
		seen[h] = true
		got, ok := ParseHandle(h)
		if !ok || got != k {
			t.Fatalf("ParseHandle(%q) = %v, %v", h, got, ok)
		}
		if strings.Contains(k.String(), h[4:12]) {
			t.Fatal("key reveals the handle")
		}
	}
}

func TestParseHandleRejects(t *testing.T) {
	h, _, _ := newHandle()
	flip := func(i int) string {
		b := []byte(h)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	for name, s := range map[string]string{
		"empty":          "",
		"no prefix":      "xxx_" + h[4:],
		"short":          h[:len(h)-1],
		"long":           h + "a",
		"body typo":      flip(10),
		"checksum typo":  flip(len(h) - 1),
		"non-base62":     h[:20] + "-" + h[21:],
		"lower prefix":   strings.ToUpper(h[:4]) + h[4:],
		"space inserted": h[:10] + " " + h[11:],
	} {
		if _, ok := ParseHandle(s); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseHandle(f *testing.F) {
	h, _, _ := newHandle()
	f.Add(h)
	f.Add("alh_")
	f.Add(h[:len(h)-1] + "0")
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := ParseHandle(s)
		if ok && k != keyOf(s) {
			t.Fatal("key mismatch")
		}
		if ok && !handleRE.MatchString(s) {
			t.Fatalf("accepted a malformed handle %q", s)
		}
	})
}

// The limb-wise encoder writes the same digits as math/big's base-62
// conversion (the handle format every issued handle has), at the edges
// and for random numbers.
func TestEncodeBase62MatchesBigInt(t *testing.T) {
	inputs := [][randomBytes]byte{{}, {randomBytes - 1: 1}, {0: 0x80}}
	var ones [randomBytes]byte
	for i := range ones {
		ones[i] = 0xff
	}
	inputs = append(inputs, ones)
	for range 500 {
		var r [randomBytes]byte
		if _, err := rand.Read(r[:]); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, r)
	}
	for _, raw := range inputs {
		got := make([]byte, bodyLen)
		encodeBase62(&raw, got)
		if want := bigBase62(raw); string(got) != want {
			t.Fatalf("encodeBase62(%x) = %s, want %s", raw, got, want)
		}
	}
}

// bigBase62 is the encoder handles were first issued with.
func bigBase62(raw [randomBytes]byte) string {
	n, base, mod := new(big.Int).SetBytes(raw[:]), big.NewInt(62), new(big.Int)
	out := make([]byte, bodyLen)
	for i := len(out) - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = base62[mod.Int64()]
	}
	return string(out)
}

// Issuing a handle allocates the handle string and nothing else (the
// race detector's crypto/rand adds one).
func TestNewHandleAllocs(t *testing.T) {
	want := 1.0
	if raceEnabled {
		want++
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = newHandle() }); n != want {
		t.Fatalf("newHandle allocates %v times, want %v", n, want)
	}
}
