package h1

import (
	"strings"
	"testing"
)

// FuzzAppendHeaderValue: a header value is written with each CR, LF and
// NUL turned into a space, and nothing else changed, so no value can
// split a head.
func FuzzAppendHeaderValue(f *testing.F) {
	for _, s := range []string{"", "plain", "a\r\nb", "\x00", "\r", "x\n", "über\r\x00\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		// The reference: byte by byte, as net/http's header writer
		// replaces them (any UTF-8 or not).
		want := strings.NewReplacer("\r", " ", "\n", " ", "\x00", " ").Replace(v)
		if got := string(appendHeaderValue([]byte("X: "), v)); got != "X: "+want {
			t.Fatalf("appendHeaderValue(%q) = %q, want %q", v, got[3:], want)
		}
	})
}
