package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"unicode/utf16"
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

// maxPooledKeep is the longest held-back tail a pooled buffer fits;
// longer secrets get a buffer of their own.
const maxPooledKeep = 4 << 10

// bufPool recycles guard buffers: one per response would otherwise be
// the proxy's largest allocation.
var bufPool = sync.Pool{New: func() any { b := make([]byte, echoChunk+maxPooledKeep); return &b }}

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

// redactHeaders replaces secret forms in header values and drops a
// header whose name holds one.
func redactHeaders(h http.Header, ef *echoForms) int {
	if ef == nil {
		return 0
	}
	hits := 0
	for k, vals := range h {
		if nameHoldsForm(k, ef) {
			// A name cannot be rewritten into a token that still
			// means something, and the parsers change its case: the
			// header goes.
			delete(h, k)
			hits++
			continue
		}
		for i, v := range vals {
			for _, f := range ef.strs {
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

// nameHoldsForm reports whether the header name k holds one of ef's
// forms in any case: names are canonicalised as they are parsed
// ("x-sk-abc" becomes "X-Sk-Abc"), so an exact match would miss them.
func nameHoldsForm(k string, ef *echoForms) bool {
	for _, f := range ef.strs {
		for i := 0; i+len(f) <= len(k); i++ {
			if strings.EqualFold(k[i:i+len(f)], f) {
				return true
			}
		}
	}
	return false
}

// unscannableEncoding refuses a response compressed although the proxy
// asked for identity: the guard cannot see a secret inside it.
func unscannableEncoding(h http.Header) *denial {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return deny(CodeUnscannable, "the upstream answered with a content encoding the echo guard cannot scan").withReason("Content-Encoding " + ce)
	}
	return nil
}

// redactor streams src with every pattern overwritten. Of what it has
// read it holds back only a tail that could begin a secret (heldTail, at
// most the longest form minus one byte) until more arrives or the stream
// ends, so a secret split across reads is still caught; memory is bounded
// by one chunk plus that tail.
type redactor struct {
	src    io.Reader
	pats   [][]byte
	keep   int
	buf    []byte
	pooled *[]byte // buf's pool slot, returned at EOF or release
	start  int     // next byte to hand out
	end    int     // bytes before end are scanned and may be handed out
	done   bool
	err    error
	hits   int
	nbytes int64
}

// newRedactor guards src against ef's forms; nil ef only counts bytes.
func newRedactor(src io.Reader, ef *echoForms) *redactor {
	r := &redactor{}
	r.init(src, ef)
	return r
}

// init makes r, a zero redactor, guard src against ef's forms (in
// place: a guarded response body holds its redactor by value).
func (r *redactor) init(src io.Reader, ef *echoForms) {
	r.src = src
	if ef != nil {
		r.pats, r.keep = ef.pats, ef.keep
	}
}

// echoForms are the spellings of a secret the echo guard looks for.
type echoForms struct {
	strs []string // distinct forms at least minEchoLen long
	pats [][]byte // the same, as bytes
	keep int      // longest form minus one: the most a stream holds back
}

func newEchoForms(forms []string) *echoForms {
	ef := &echoForms{}
	for _, f := range dedupe(forms) {
		if len(f) < minEchoLen {
			continue
		}
		ef.strs = append(ef.strs, f)
		ef.pats = append(ef.pats, []byte(f))
		ef.keep = max(ef.keep, len(f)-1)
	}
	return ef
}

// formsCache memoizes the forms of recently used secrets: encoding them
// for every request was a fifth of the decision path's allocations. It
// is cleared when full, so a rotated secret does not linger in it.
var formsCache = memo[formsKey, *echoForms]{max: 256}

// formsKey names a set of forms: the secret, the basic-auth user sent
// with it, and a value derived from it (an access token, a session
// token) that the guard must catch too.
type formsKey struct{ secret, basicUser, derived string }

// encodings are the forms of v the echo guard looks for: raw; base64 in
// the standard and URL alphabets, as the characters that depend on v
// alone, at each of the three offsets v can have in a longer encoded
// text (so padded, unpadded and v anywhere in a longer text are all
// caught); percent-encoded as a grpc-message trailer carries it; query- and path-escaped; and for a value with line
// breaks (a PEM key) its lines joined by LF and by CRLF, each also
// JSON-escaped ("\n", "\r\n"). Any value JSON escapes is caught
// JSON-escaped, with and without HTML escapes and with "/" as "\/".
// And every byte escaped: hex, percent-encoded, \uXXXX (byteForms).
func encodings(v string) []string {
	if v == "" {
		return nil
	}
	forms := []string{v, base64Core(base64.StdEncoding, v), base64Core(base64.URLEncoding, v), url.QueryEscape(v), url.PathEscape(v)}
	for o := 1; o <= 2; o++ {
		forms = append(forms, base64Shifted(base64.StdEncoding, v, o), base64Shifted(base64.URLEncoding, v, o))
	}
	if g := grpcPercentEncode(v); g != v {
		forms = append(forms, g)
	}
	forms = append(forms, byteForms(v)...)
	texts := []string{v}
	if strings.Contains(v, "\n") {
		lf := strings.ReplaceAll(v, "\r\n", "\n")
		texts = append(texts, lf, strings.ReplaceAll(lf, "\n", "\r\n"))
	}
	for _, t := range texts {
		forms = append(forms, t)
		for _, html := range []bool{false, true} {
			j := jsonEscape(t, html)
			forms = append(forms, j, strings.ReplaceAll(j, "/", `\/`))
		}
	}
	return forms
}

// secretForms are the forms of every value given.
func secretForms(values ...string) []string {
	var forms []string
	for _, v := range values {
		forms = append(forms, encodings(v)...)
	}
	return forms
}

// base64Core is the encoding of v without its last character when that
// character also holds bits of what follows v (and without padding).
func base64Core(enc *base64.Encoding, v string) string {
	return enc.EncodeToString([]byte(v))[:len(v)*8/6]
}

// base64Shifted is the encoding of v after o (1 or 2) bytes of
// anything ("Bearer <v>" in a gRPC "-bin" trailer), without the
// characters that also hold bits of what precedes or follows v.
func base64Shifted(enc *base64.Encoding, v string, o int) string {
	s := enc.EncodeToString(append(make([]byte, o), v...))
	return s[o+1 : (o+len(v))*8/6]
}

// byteForms are the spellings of v that write every byte (or character)
// as an escape: hex, every byte percent-encoded, every character a JSON
// \uXXXX escape — each with lower- and upper-case hex digits. They cost
// one pattern each, and an upstream that hex-dumps or escapes what it
// got produces them whole.
func byteForms(v string) []string {
	var forms []string
	for _, digits := range []string{"%02x", "%02X"} {
		var h, pct, uni strings.Builder
		for i := 0; i < len(v); i++ {
			fmt.Fprintf(&h, digits, v[i])
			fmt.Fprintf(&pct, "%%"+digits, v[i])
		}
		for _, u := range utf16.Encode([]rune(v)) {
			fmt.Fprintf(&uni, `\u`+strings.Replace(digits, "2", "4", 1), u)
		}
		forms = append(forms, h.String(), pct.String(), uni.String())
	}
	return forms
}

// grpcPercentEncode is v as a grpc-message trailer carries it (the
// client decodes it): bytes outside printable ASCII, and '%', as %XX.
func grpcPercentEncode(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsonEscape is v as it appears inside a JSON string, with <, > and &
// escaped when html is set (as Go's encoder does by default).
func jsonEscape(v string, html bool) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	_ = e.Encode(v)
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

func cachedForms(k formsKey, build func() []string) *echoForms {
	if ef, ok := formsCache.load(k); ok {
		return ef
	}
	ef := newEchoForms(build())
	formsCache.store(k, ef)
	return ef
}

// next returns the next run of scanned bytes that may be handed out, or
// the read error (io.EOF at the end) once there are none. The slice is
// valid until the next call.
func (r *redactor) next() ([]byte, error) {
	for r.start == r.end {
		if r.done {
			r.release()
			return nil, r.err
		}
		if r.buf == nil {
			if r.keep <= maxPooledKeep {
				r.pooled = bufPool.Get().(*[]byte)
				r.buf = (*r.pooled)[: 0 : echoChunk+r.keep]
			} else {
				r.buf = make([]byte, 0, echoChunk+r.keep)
			}
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
		if len(r.pats) > 0 {
			r.hits += redactInPlace(r.buf, r.pats)
		}
		hold := 0
		if !r.done {
			hold = r.heldTail(r.buf)
		}
		r.end = len(r.buf) - hold
	}
	out := r.buf[r.start:r.end]
	r.start = r.end
	r.nbytes += int64(len(out))
	return out, nil
}

// heldTail is how many bytes at the end of b must wait for more input:
// the longest suffix of b that is a proper prefix of a form, since only
// such a suffix can be the start of a secret split across reads. A
// stream that does not contain the secret is handed out read by read.
func (r *redactor) heldTail(b []byte) int {
	for i := max(0, len(b)-r.keep); i < len(b); i++ {
		t := b[i:]
		for _, p := range r.pats {
			if len(t) < len(p) && t[0] == p[0] && bytes.HasPrefix(p, t) {
				return len(t)
			}
		}
	}
	return 0
}

// Read implements io.Reader on top of next.
func (r *redactor) Read(p []byte) (int, error) {
	if r.start == r.end {
		if _, err := r.peek(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.start:r.end])
	r.start += n
	r.nbytes += int64(n)
	return n, nil
}

// peek fills the buffer without handing anything out.
func (r *redactor) peek() ([]byte, error) {
	chunk, err := r.next()
	if err != nil {
		return nil, err
	}
	// next advanced past chunk; step back so Read hands it out.
	r.start -= len(chunk)
	r.nbytes -= int64(len(chunk))
	return chunk, nil
}

// WriteTo writes the guarded stream to w without an intermediate copy.
// io.Copy prefers it to the destination's ReadFrom, which for a TCP
// connection would allocate a 32 KiB buffer per response.
func (r *redactor) WriteTo(w io.Writer) (int64, error) { return r.copyTo(w, nil) }

// copyTo is WriteTo that, when f is set, flushes after every write: each
// write is what one upstream read made safe to hand out, so a stream's
// events reach the client as the upstream sends them, and a bulk body
// costs one flush per chunk, which a full buffer would cost anyway.
func (r *redactor) copyTo(w io.Writer, f http.Flusher) (int64, error) {
	var total int64
	for {
		chunk, err := r.next()
		if len(chunk) > 0 {
			n, werr := w.Write(chunk)
			total += int64(n)
			if werr != nil {
				return total, werr
			}
			if f != nil {
				f.Flush()
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// release returns the buffer to the pool; the redactor must not read
// into it afterwards (Read after EOF answers from r.err alone).
func (r *redactor) release() {
	if r.pooled != nil {
		bufPool.Put(r.pooled)
		r.pooled = nil
	}
	r.buf, r.start, r.end = nil, 0, 0
}
