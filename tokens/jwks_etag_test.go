package tokens

import "testing"

// If-None-Match: a list, weak tags and "*" all match; others do not.
func TestETagMatch(t *testing.T) {
	const etag = `"abc123"`
	for _, tt := range []struct {
		h    []string
		want bool
	}{
		{[]string{`"abc123"`}, true},
		{[]string{`W/"abc123"`}, true},
		{[]string{`"x", "abc123"`}, true},
		{[]string{`"x"`, `W/"abc123"`}, true},
		{[]string{`*`}, true},
		{[]string{`"abc12"`}, false},
		{nil, false},
	} {
		if got := etagMatch(tt.h, etag); got != tt.want {
			t.Errorf("%q: %v", tt.h, got)
		}
	}
}
