package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// Redaction is what the echo guard writes over an echoed secret in a
// header. In a body the replacement keeps the length of what it replaces
// ("[REDACTED]" padded with '*', or all '*' when shorter), so
// Content-Length stays true and the body can be streamed.
const Redaction = "[REDACTED]"

// minEchoLen: forms shorter than this are not scanned for (a 3-character
// "secret" would shred ordinary text; such secrets are a config error).
const minEchoLen = 6

// echoChunk is how much of a body the guard reads at a time.
const echoChunk = 32 << 10

func mask(n int) []byte {
	m := bytes.Repeat([]byte{'*'}, n)
	if n >= len(Redaction) {
		copy(m, Redaction)
	}
	return m
}

// redactInPlace overwrites every occurrence of each pattern in b and
// returns how many it found.
func redactInPlace(b []byte, pats [][]byte) int {
	hits := 0
	for _, p := range pats {
		for i := 0; ; {
			j := bytes.Index(b[i:], p)
			if j < 0 {
				break
			}
			copy(b[i+j:], mask(len(p)))
			hits++
			i += j + len(p)
		}
	}
	return hits
}

// redactHeaders replaces secret forms in header values.
func redactHeaders(h http.Header, forms []string) int {
	hits := 0
	for k, vals := range h {
		for i, v := range vals {
			for _, f := range forms {
				if len(f) >= minEchoLen && strings.Contains(v, f) {
					hits += strings.Count(v, f)
					v = strings.ReplaceAll(v, f, Redaction)
				}
			}
			h[k][i] = v
		}
	}
	return hits
}

// redactor streams src with every pattern overwritten. It holds back the
// last maxLen-1 bytes of what it has read until more arrives (or EOF), so
// a secret split across reads is still caught; memory is bounded by one
// chunk plus that tail.
type redactor struct {
	src    io.Reader
	pats   [][]byte
	keep   int
	buf    []byte
	start  int // next byte to hand out
	end    int // bytes before end are scanned and may be handed out
	done   bool
	err    error
	hits   int
	nbytes int64
}

func newRedactor(src io.Reader, forms []string) *redactor {
	r := &redactor{src: src}
	maxLen := 0
	for _, f := range forms {
		if len(f) < minEchoLen {
			continue
		}
		r.pats = append(r.pats, []byte(f))
		maxLen = max(maxLen, len(f))
	}
	if maxLen > 0 {
		r.keep = maxLen - 1
	}
	return r
}

func (r *redactor) Read(p []byte) (int, error) {
	if len(r.pats) == 0 {
		n, err := r.src.Read(p)
		r.nbytes += int64(n)
		return n, err
	}
	for r.start == r.end {
		if r.done {
			return 0, r.err
		}
		if r.buf == nil {
			r.buf = make([]byte, 0, echoChunk+r.keep)
		}
		// Move the held-back tail to the front and read after it.
		n := copy(r.buf[:cap(r.buf)], r.buf[r.end:])
		r.buf = r.buf[:n]
		r.start, r.end = 0, 0
		m, err := r.src.Read(r.buf[n:cap(r.buf)])
		r.buf = r.buf[:n+m]
		if err != nil {
			r.done, r.err = true, err
		}
		r.hits += redactInPlace(r.buf, r.pats)
		keep := r.keep
		if r.done {
			keep = 0
		}
		if len(r.buf) > keep {
			r.end = len(r.buf) - keep
		}
	}
	n := copy(p, r.buf[r.start:r.end])
	r.start += n
	r.nbytes += int64(n)
	return n, nil
}
