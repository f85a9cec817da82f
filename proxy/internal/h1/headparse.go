package h1

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// The fast path's header-block parser, shared by the client's request
// head (headfast.go, conn.go) and the upstream's response head
// (ReadResponse). net/textproto's reader allocates a string per line, per
// name and per value; this one reads a head that is already whole in a
// connection's buffer, copies it into one string, and takes every name
// and value as a substring of it.
//
// It reads only the plainest heads and gives up (ok false) on anything
// else, leaving the bytes for net/http's parser: lines not ended by CRLF,
// obs-fold, a name that is not a token or has a space before its colon,
// a value byte net/textproto would refuse, Transfer-Encoding, Trailer,
// more than one Content-Length or one that is not plain digits. Within
// what it reads it gives exactly what net/textproto and net/http give
// (FuzzHeaderBlock, FuzzFastRequest and FuzzFastResponse hold it to
// that): names
// canonicalised as textproto canonicalises them, values trimmed of spaces
// and tabs only, repeated names kept in order, and net/http's
// Pragma: no-cache rule. It never refuses: refusals, with their codes,
// stay with the slow path, so the fast path cannot be less strict.

// headerBlock is a parsed header block and what the framing needs of it.
type headerBlock struct {
	header http.Header
	hosts  int    // Host lines
	host   string // the first Host value
	hasCL  bool
	cl     int64 // the Content-Length, when hasCL
}

// maxFastCLDigits bounds a Content-Length the fast path reads: 18
// digits cannot overflow an int64; a longer one is net/http's to judge.
const maxFastCLDigits = 18

// parseHeaderBlock parses the header block s: the header lines after a
// start line, each ended by CRLF, and the blank line that ends the head
// (fastHead cuts it so). Each name's values are carved from strs (as
// net/textproto carves them from one slice: most names come once), or
// from a slice of its own when strs is too short. ok is false for
// anything the fast path does not read.
func parseHeaderBlock(s string, strs []string) (b headerBlock, ok bool) {
	block, ok := strings.CutSuffix(s, "\r\n")
	if !ok {
		return b, false
	}
	lines := strings.Count(block, "\n")
	if lines > len(strs) {
		strs = make([]string, lines)
	}
	b.header = make(http.Header, lines)
	for len(block) > 0 {
		eol := strings.IndexByte(block, '\n')
		if eol < 1 || block[eol-1] != '\r' {
			return b, false
		}
		line := block[:eol-1]
		block = block[eol+1:]
		name, value, ok := splitHeaderLine(line)
		if !ok {
			return b, false
		}
		switch name {
		case "Transfer-Encoding", "Trailer":
			return b, false
		case "Content-Length":
			if b.hasCL {
				return b, false
			}
			if b.cl, ok = parseFastCL(value); !ok {
				return b, false
			}
			b.hasCL = true
		case "Host":
			if b.hosts == 0 {
				b.host = value
			}
			b.hosts++
		}
		if vv := b.header[name]; vv == nil && len(strs) > 0 {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = value
			b.header[name] = vv
		} else {
			b.header[name] = append(vv, value)
		}
	}
	fixPragmaCacheControl(b.header)
	return b, true
}

// splitHeaderLine splits a "Name: value" line (its CRLF dropped) into
// the canonical name and the trimmed value; ok is false for a name that
// is not a token directly followed by a colon, or a value byte
// net/textproto refuses (a control character other than tab, or DEL).
func splitHeaderLine(line string) (name, value string, ok bool) {
	canonical, upper := true, true
	i := 0
	for ; i < len(line) && line[i] != ':'; i++ {
		c := line[i]
		if !httpguts.IsTokenRune(rune(c)) {
			return "", "", false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
		}
		upper = c == '-'
	}
	if i == 0 || i == len(line) {
		return "", "", false
	}
	name, value = line[:i], line[i+1:]
	if !validValue(value) {
		return "", "", false
	}
	if !canonical {
		name = canonicalName(name)
	}
	return name, trimOWSString(value), true
}

// validValue reports whether s holds only bytes net/textproto allows in
// a header value: no control character but tab, no DEL. A value it
// allows httpguts.ValidHeaderFieldValue allows too.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// canonicalName is http.CanonicalHeaderKey for a token, without an
// allocation for the names clients commonly send in lower case.
func canonicalName(name string) string {
	var buf [32]byte
	if len(name) <= len(buf) {
		b := buf[:len(name)]
		upper := true
		for i := range len(name) {
			c := name[i]
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b[i] = c
			upper = c == '-'
		}
		if v, ok := commonNames[string(b)]; ok {
			return v
		}
	}
	return http.CanonicalHeaderKey(name)
}

// commonNames interns the canonical names of headers clients and servers
// often send in lower case (Node, botocore, HTTP/2 habits).
var commonNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Encoding", "Content-Length", "Content-Md5", "Content-Type",
		"Cookie", "Date", "Etag", "Expect", "Expires", "Host", "Keep-Alive", "Last-Modified",
		"Location", "Proxy-Authorization", "Proxy-Connection", "Server", "Set-Cookie",
		"Transfer-Encoding", "Trailer", "Upgrade", "User-Agent", "Vary",
		"X-Amz-Content-Sha256", "X-Amz-Date", "X-Amz-Security-Token", "X-Api-Key",
		"X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// trimOWSString trims spaces and tabs, as net/textproto trims values.
func trimOWSString(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseFastCL parses a Content-Length of plain digits, as net/http's
// strconv.ParseUint does for the lengths the fast path reads.
func parseFastCL(s string) (int64, bool) {
	if s == "" || len(s) > maxFastCLDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// fixPragmaCacheControl is net/http's rule (RFC 7234 §5.4): a
// Pragma: no-cache without a Cache-Control stands for one.
func fixPragmaCacheControl(h http.Header) {
	if hp, ok := h["Pragma"]; ok && len(hp) > 0 && hp[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
}

// sizedBody is a body of a known, non-zero length read from the
// connection's buffered reader, with the behaviour of the body net/http's
// parsers return for a Content-Length: io.EOF with the last byte,
// io.ErrUnexpectedEOF when the peer closes early, http.ErrBodyReadAfterClose
// after Close, and a Close that reads the rest (so the next message
// starts where it should) unless the connection closes after it.
type sizedBody struct {
	mu      sync.Mutex
	src     io.LimitedReader
	closing bool
	sawEOF  bool
	closed  bool
}

func (b *sizedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *sizedBody) readLocked(p []byte) (n int, err error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err = b.src.Read(p)
	if err == io.EOF {
		b.sawEOF = true
		if b.src.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && b.src.N == 0 {
		err, b.sawEOF = io.EOF, true
	}
	return n, err
}

func (b *sizedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	if !b.sawEOF && !b.closing {
		_, err = io.Copy(io.Discard, sizedBodyLocked{b})
	}
	b.closed = true
	return err
}

// sizedBodyLocked reads b with its lock held (by Close).
type sizedBodyLocked struct{ b *sizedBody }

func (bl sizedBodyLocked) Read(p []byte) (int, error) {
	if bl.b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return bl.b.readLocked(p)
}
