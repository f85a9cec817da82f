package mcp

import (
	"io"
	"strings"
	"testing"
)

// atEnd calls its function once, when the body's last byte is read:
// at its declared length without waiting for EOF, or at EOF when the
// length is unknown; never for a body read only in part.
func TestAtEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length int64
		read   int // bytes to read; -1: all, then EOF
		calls  int
	}{
		{"declared length, EOF not read", 5, 5, 1},
		{"declared length, read past", 5, -1, 1},
		{"unknown length, EOF", -1, -1, 1},
		{"unknown length, all bytes but no EOF", -1, 5, 0},
		{"part of it", 5, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			b := &atEnd{ReadCloser: io.NopCloser(strings.NewReader("hello")), length: tc.length, fn: func() { calls++ }}
			if tc.read < 0 {
				if _, err := io.ReadAll(b); err != nil {
					t.Fatal(err)
				}
				_, _ = b.Read(make([]byte, 1)) // a read past the end
			} else {
				buf := make([]byte, tc.read)
				if _, err := io.ReadFull(b, buf); err != nil {
					t.Fatal(err)
				}
			}
			if calls != tc.calls {
				t.Fatalf("called %d times, want %d", calls, tc.calls)
			}
		})
	}
}
