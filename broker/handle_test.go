package broker

import (
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
