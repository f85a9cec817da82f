package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The head fast paths (headfast.go, headparse.go) against net/http's
// parsers: the same bytes must give the same request or response, the
// same body and errors, and leave the connection at the same byte.

// requestView is everything readRequest's caller sees of a request, its
// body read to the end (or closed first), and what is left to read on the
// connection after it.
type requestView struct {
	Code                         RefuseCode
	Reason                       string
	Method, Proto, RequestURI    string
	ProtoMajor, ProtoMinor       int
	URL                          any
	Header, Trailer              http.Header
	Host, RemoteAddr             string
	ContentLength                int64
	TransferEncoding             []string
	Close, NoBody                bool
	Body                         string
	BodyErr, CloseErr, AfterRead error
	Rest                         string
}

// readRequestView reads the first request of raw with read (readRequest
// or readRequestSlow) on a client connection whose head limit is limit.
func readRequestView(raw string, limit int64, closeFirst bool, read func(*Conn) (*http.Request, RefuseCode, string)) requestView {
	cs := &Server{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, HeaderLimit: limit}
	c := newConn(cs, testenv.NewMemConn(raw), context.Background())
	_, _ = c.br.Peek(1) // as serve waits for a request
	req, code, reason := read(c)
	v := requestView{Code: code, Reason: reason}
	if req != nil {
		v = requestView{Method: req.Method, Proto: req.Proto, RequestURI: req.RequestURI,
			ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor, URL: *req.URL, Header: req.Header, Trailer: req.Trailer,
			Host: req.Host, RemoteAddr: req.RemoteAddr, ContentLength: req.ContentLength,
			TransferEncoding: req.TransferEncoding, Close: req.Close, NoBody: req.Body == http.NoBody}
		v.Body, v.BodyErr, v.CloseErr, v.AfterRead = readBody(req.Body, closeFirst)
	}
	rest, _ := io.ReadAll(c.br)
	v.Rest = string(rest)
	return v
}

// readBody reads body to its end and closes it, or closes it first; it
// returns what was read, the errors, and what a read after both gives.
func readBody(body io.ReadCloser, closeFirst bool) (string, error, error, error) {
	var b []byte
	var readErr, closeErr error
	if closeFirst {
		closeErr = body.Close()
		b, readErr = io.ReadAll(body)
	} else {
		b, readErr = io.ReadAll(body)
		closeErr = body.Close()
	}
	_, after := body.Read(make([]byte, 1))
	return string(b), readErr, closeErr, after
}

// FuzzFastRequest: readRequest (the fast path, falling back to
// http.ReadRequest) reads every input as readRequestSlow (http.ReadRequest
// and the proxy's checks) does: the same Refusal code and reason, or the
// same request, body, body errors and framing.
func FuzzFastRequest(f *testing.F) {
	for _, s := range fastRequestSeeds {
		f.Add(s, uint16(0), false)
	}
	f.Add("GET / HTTP/1.1\r\nHost: a\r\nX-Long: 0123456789\r\n\r\n", uint16(40), false)
	f.Add("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nabc", uint16(0), true)
	f.Fuzz(func(t *testing.T, raw string, limit uint16, closeFirst bool) {
		lim := int64(1 << 20)
		if limit != 0 {
			lim = int64(limit)
		}
		ours := readRequestView(raw, lim, closeFirst, (*Conn).readRequest)
		ref := readRequestView(raw, lim, closeFirst, (*Conn).readRequestSlow)
		if !reflect.DeepEqual(ours, ref) {
			t.Fatalf("readRequest:\n%+v\nreadRequestSlow:\n%+v", ours, ref)
		}
	})
}

// responseView is what send's caller sees of a response, as
// requestView.
type responseView struct {
	Err                          string
	Status, Proto                string
	StatusCode                   int
	ProtoMajor, ProtoMinor       int
	Header, Trailer              http.Header
	ContentLength                int64
	TransferEncoding             []string
	Close, Uncompressed, NoBody  bool
	Request                      *http.Request
	TLS                          bool
	Body                         string
	BodyErr, CloseErr, AfterRead error
}

// readResponseViews reads up to three responses to req from raw with
// read, each body read to its end (or closed first), and what is left.
func readResponseViews(raw string, req *http.Request, closeFirst bool, read func(*bufio.Reader, *http.Request) (*http.Response, error)) ([]responseView, string) {
	br := bufio.NewReaderSize(strings.NewReader(raw), 16<<10)
	var views []responseView
	for range 3 {
		resp, err := read(br, req)
		if err != nil {
			views = append(views, responseView{Err: err.Error()})
			break
		}
		v := responseView{Status: resp.Status, Proto: resp.Proto, StatusCode: resp.StatusCode,
			ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor, Header: resp.Header, Trailer: resp.Trailer,
			ContentLength: resp.ContentLength, TransferEncoding: resp.TransferEncoding, Close: resp.Close,
			Uncompressed: resp.Uncompressed, NoBody: resp.Body == http.NoBody, Request: resp.Request, TLS: resp.TLS != nil}
		v.Body, v.BodyErr, v.CloseErr, v.AfterRead = readBody(resp.Body, closeFirst)
		views = append(views, v)
		if v.BodyErr != nil || resp.Close {
			break
		}
	}
	rest, _ := io.ReadAll(br)
	return views, string(rest)
}

// FuzzFastResponse: ReadResponse (the fast path, falling back to
// http.ReadResponse) reads every input as http.ReadResponse does: the
// same responses, one after another, bodies, body errors and framing.
func FuzzFastResponse(f *testing.F) {
	for _, s := range fastResponseSeeds {
		f.Add(s, uint8(0), false)
	}
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", uint8(1), false)
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", uint8(0), true)
	f.Fuzz(func(t *testing.T, raw string, method uint8, closeFirst bool) {
		req := &http.Request{Method: []string{http.MethodGet, http.MethodHead, http.MethodPost, ""}[method%4]}
		if method%4 == 3 {
			req = nil
		}
		ours, oursRest := readResponseViews(raw, req, closeFirst, ReadResponse)
		ref, refRest := readResponseViews(raw, req, closeFirst, http.ReadResponse)
		if !reflect.DeepEqual(ours, ref) || oursRest != refRest {
			t.Fatalf("ReadResponse:\n%+v\nrest %q\nhttp.ReadResponse:\n%+v\nrest %q", ours, oursRest, ref, refRest)
		}
	})
}

// Heads real clients and servers send: the fast path reads each.
var (
	fastRequestSeeds = []string{
		// curl, absolute-form through HTTP_PROXY
		"GET http://api.example.com/v1/x?a=1 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nProxy-Authorization: Bearer alh_0123456789\r\nProxy-Connection: Keep-Alive\r\n\r\n",
		// Python requests
		"POST http://api.example.com/v1/items HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: keep-alive\r\nContent-Length: 13\r\nContent-Type: application/json\r\n\r\n{\"name\":\"x\"}\n",
		// botocore inside a tunnel: origin-form, Expect
		"PUT /bucket/key HTTP/1.1\r\nHost: s3.amazonaws.com\r\nUser-Agent: Boto3/1.34\r\nContent-MD5: 1B2M2Y8AsgTpgAmY7PhCfg==\r\nExpect: 100-continue\r\nX-Amz-Date: 20260101T000000Z\r\nX-Amz-Content-SHA256: UNSIGNED-PAYLOAD\r\nAuthorization: AWS4-HMAC-SHA256 Credential=x\r\nContent-Length: 3\r\n\r\nabc",
		// Node, lower-case names
		"GET /v1/x HTTP/1.1\r\nhost: api.example.com\r\nx-api-key: alh_x\r\nconnection: close\r\n\r\n",
		"DELETE /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nx-a: 2\r\nX-A:3 \r\nPragma: no-cache\r\n\r\n",
		"PATCH /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabc",
		"GET /%2e%2e/a%20b?q=%zz#frag HTTP/1.1\r\nHost: [::1]:80\r\nX-Empty:\r\nX-Obs: caf\xc3\xa9\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	}
	fastResponseSeeds = []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\n\r\n{}",
		"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nLocation: /x\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
		"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nPragma: no-cache\r\n\r\n",
		"HTTP/1.1 404\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\ncontent-length: 3\r\n\r\nno\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcd",
	}
)

// fallbackRequests are read by net/http's parser, never the fast path.
var fallbackRequests = []struct{ name, raw string }{
	{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
	{"te-and-cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"two-cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
	{"cl-sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc"},
	{"trailer", "GET / HTTP/1.1\r\nHost: a\r\nTrailer: X\r\n\r\n"},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"},
	{"bare-lf", "GET / HTTP/1.1\nHost: a\n\n"},
	{"lf-in-head", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n"},
	{"space-before-colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n"},
	{"control-byte", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n"},
	{"cr-in-value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"},
	{"http10", "GET / HTTP/1.0\r\n\r\n"},
	{"http2", "GET / HTTP/2.0\r\nHost: a\r\n\r\n"},
	{"connect", "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n"},
	{"no-host", "GET / HTTP/1.1\r\n\r\n"},
	{"two-hosts", "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"},
	{"bad-host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n"},
	{"nbsp-host", "GET http://a/ HTTP/1.1\r\nHost: \u00a0a\r\n\r\n"},
	{"bad-method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"bad-target", "GET a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"incomplete", "GET / HTTP/1.1\r\nHost: a\r\n"},
	{"too-large", "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("x", 100) + "\r\n\r\n"},
}

func TestFastRequestTaken(t *testing.T) {
	for i, raw := range fastRequestSeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(raw), 4<<10)
			_, _ = br.Peek(1)
			if parseRequestFast(br, 1<<20) == nil {
				t.Fatalf("the fast path did not read %q", raw)
			}
			for _, closeFirst := range []bool{false, true} {
				ours := readRequestView(raw, 1<<20, closeFirst, (*Conn).readRequest)
				ref := readRequestView(raw, 1<<20, closeFirst, (*Conn).readRequestSlow)
				if !reflect.DeepEqual(ours, ref) {
					t.Fatalf("fast path:\n%+v\nnet/http:\n%+v", ours, ref)
				}
			}
		})
	}
}

func TestFastRequestFallsBack(t *testing.T) {
	for _, tc := range fallbackRequests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.raw), 4<<10)
			_, _ = br.Peek(1)
			n := br.Buffered()
			if parseRequestFast(br, 64) != nil || br.Buffered() != n {
				t.Fatalf("the fast path read %q (%d of %d bytes left)", tc.raw, br.Buffered(), n)
			}
			ours := readRequestView(tc.raw, 64, false, (*Conn).readRequest)
			ref := readRequestView(tc.raw, 64, false, (*Conn).readRequestSlow)
			if !reflect.DeepEqual(ours, ref) {
				t.Fatalf("readRequest:\n%+v\nreadRequestSlow:\n%+v", ours, ref)
			}
		})
	}
}

// fallbackResponses are read by http.ReadResponse, never the fast path.
var fallbackResponses = []struct{ name, raw string }{
	{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"},
	{"close-delimited", "HTTP/1.1 200 OK\r\n\r\nbody"},
	{"http10", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx"},
	{"two-cl", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"},
	{"trailer", "HTTP/1.1 200 OK\r\nTrailer: X\r\nContent-Length: 1\r\n\r\nx"},
	{"obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 1\r\n\r\nx"},
	{"status-600", "HTTP/1.1 600 X\r\nContent-Length: 1\r\n\r\nx"},
	{"no-reason-space", "HTTP/1.1 200OK\r\nContent-Length: 1\r\n\r\nx"},
	{"bare-lf", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx"},
	{"space-before-colon", "HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx"},
}

func TestFastResponseTaken(t *testing.T) {
	for i, raw := range fastResponseSeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(raw), 16<<10)
			_, _ = br.Peek(1)
			if parseResponseFast(br, &http.Request{Method: http.MethodGet}) == nil {
				t.Fatalf("the fast path did not read %q", raw)
			}
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				for _, closeFirst := range []bool{false, true} {
					req := &http.Request{Method: method}
					ours, oursRest := readResponseViews(raw, req, closeFirst, ReadResponse)
					ref, refRest := readResponseViews(raw, req, closeFirst, http.ReadResponse)
					if !reflect.DeepEqual(ours, ref) || oursRest != refRest {
						t.Fatalf("%s: fast path:\n%+v %q\nnet/http:\n%+v %q", method, ours, oursRest, ref, refRest)
					}
				}
			}
		})
	}
}

func TestFastResponseFallsBack(t *testing.T) {
	for _, tc := range fallbackResponses {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.raw), 16<<10)
			_, _ = br.Peek(1)
			n := br.Buffered()
			if resp := parseResponseFast(br, &http.Request{Method: http.MethodGet}); resp != nil || br.Buffered() != n {
				t.Fatalf("the fast path read %q (%d of %d bytes left)", tc.raw, br.Buffered(), n)
			}
			req := &http.Request{Method: http.MethodGet}
			ours, oursRest := readResponseViews(tc.raw, req, false, ReadResponse)
			ref, refRest := readResponseViews(tc.raw, req, false, http.ReadResponse)
			if !reflect.DeepEqual(ours, ref) || oursRest != refRest {
				t.Fatalf("ReadResponse:\n%+v %q\nhttp.ReadResponse:\n%+v %q", ours, oursRest, ref, refRest)
			}
		})
	}
}

// A cut-short first read is what http.ReadResponse reports for it.
func TestReadResponseEmpty(t *testing.T) {
	_, err := ReadResponse(bufio.NewReader(strings.NewReader("")), nil)
	_, want := http.ReadResponse(bufio.NewReader(strings.NewReader("")), nil)
	if err != want {
		t.Fatalf("ReadResponse: %v, http.ReadResponse: %v", err, want)
	}
}

// headBench is a client connection that reads raw again on every
// readRequest, and an upstream reader that reads rawResp again.
type headBench struct {
	c       *Conn
	mc      *testenv.MemConn
	raw     []byte
	br      *bufio.Reader
	rd      *strings.Reader
	rawResp string
}

func newHeadBench(raw, rawResp string) *headBench {
	mc := testenv.NewMemConn(raw)
	cs := &Server{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, HeaderLimit: 1 << 20}
	rd := strings.NewReader(rawResp)
	return &headBench{c: newConn(cs, mc, context.Background()), mc: mc, raw: []byte(raw),
		br: bufio.NewReaderSize(rd, 16<<10), rd: rd, rawResp: rawResp}
}

func (h *headBench) request(tb testing.TB, read func(*Conn) (*http.Request, RefuseCode, string)) {
	h.mc.Reset(h.raw)
	_, _ = h.c.br.Peek(1)
	req, code, reason := read(h.c)
	if req == nil {
		tb.Fatalf("refused: %v %s", code, reason)
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		tb.Fatal(err)
	}
}

func (h *headBench) response(tb testing.TB, read func(*bufio.Reader, *http.Request) (*http.Response, error)) {
	h.rd.Reset(h.rawResp)
	h.br.Reset(h.rd)
	resp, err := read(h.br, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := h.br.Discard(int(resp.ContentLength)); err != nil {
		tb.Fatal(err)
	}
}

// The fast paths are taken for ordinary heads, and allocate what their
// comments say: a request head 5 times (the head, its URL, the header
// map and its group, the Request with its values and body), lower-case
// names included; a response head 4 times. net/http's path allocates 15
// and 9.
func TestHeadAllocs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req, resp string
		want      float64
	}{
		{"curl request", fastRequestSeeds[0], "", 5},
		{"python request with body", fastRequestSeeds[1], "", 5},
		{"node request, lower-case names", fastRequestSeeds[3], "", 5},
		{"response with body", "", fastResponseSeeds[0], 4},
		{"204 response", "", "HTTP/1.1 204 No Content\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\n\r\n", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeadBench(tc.req, tc.resp)
			run := func() { h.response(t, ReadResponse) }
			if tc.req != "" {
				run = func() { h.request(t, (*Conn).readRequest) }
			}
			if got := testing.AllocsPerRun(50, run); got != tc.want {
				t.Fatalf("%v allocations, want %v", got, tc.want)
			}
		})
	}
}

func BenchmarkRequestHead(b *testing.B) {
	for _, bc := range []struct {
		name string
		read func(*Conn) (*http.Request, RefuseCode, string)
	}{{"fast", (*Conn).readRequest}, {"net-http", (*Conn).readRequestSlow}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHeadBench(fastRequestSeeds[0], "")
			b.ReportAllocs()
			for b.Loop() {
				h.request(b, bc.read)
			}
		})
	}
}

func BenchmarkResponseHead(b *testing.B) {
	for _, bc := range []struct {
		name string
		read func(*bufio.Reader, *http.Request) (*http.Response, error)
	}{{"fast", ReadResponse}, {"net-http", http.ReadResponse}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHeadBench("", fastResponseSeeds[0])
			b.ReportAllocs()
			for b.Loop() {
				h.response(b, bc.read)
			}
		})
	}
}

// FuzzHeaderBlock drives the fast paths with arbitrary header blocks
// behind a fixed start line, which FuzzFastRequest and FuzzFastResponse
// rarely get past: a block parseHeaderBlock reads is read the same by
// net/textproto, and the request and response around it are read as
// net/http reads them.
func FuzzHeaderBlock(f *testing.F) {
	for _, s := range []string{
		"Host: a\r\n\r\n",
		"Host: a\r\nContent-Length: 3\r\n\r\n",
		"host: a\r\nx-a: 1\r\nX-A: 2 \r\nPragma: no-cache\r\nConnection: close\r\n\r\n",
		"Host: a\r\ncontent-length: 0010\r\nX-Obs: caf\xc3\xa9\t\r\n\r\n",
		"Host: a\r\nX: \r\nY:\t\r\n\r\n",
		"Host: a\r\nX: 1\r\n b\r\n\r\n",
		"Host: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, block string, method uint8) {
		// A block as fastHead cuts it: up to the first blank line.
		switch end := strings.Index(block, "\r\n\r\n"); {
		case strings.HasPrefix(block, "\r\n"):
			block = "\r\n"
		case end >= 0:
			block = block[:end+4]
		default:
			block += "\r\n\r\n"
		}
		if hb, ok := parseHeaderBlock(block, nil); ok {
			tp := textproto.NewReader(bufio.NewReader(strings.NewReader(block)))
			want, err := tp.ReadMIMEHeader()
			if err != nil {
				t.Fatalf("parseHeaderBlock read %q, textproto refused it: %v", block, err)
			}
			fixPragmaCacheControl(http.Header(want))
			cl, hasCL := want["Content-Length"]
			var n uint64
			if hasCL {
				n, err = strconv.ParseUint(cl[0], 10, 63) // as net/http reads it
			}
			if !reflect.DeepEqual(hb.header, http.Header(want)) || hb.hosts != len(want["Host"]) ||
				hb.hasCL != hasCL || err != nil || hasCL && int64(n) != hb.cl {
				t.Fatalf("parseHeaderBlock read %q as %+v, textproto as %q", block, hb, want)
			}
		}
		for _, body := range []string{"", "0123456789"} {
			raw := "POST http://a/x HTTP/1.1\r\n" + block + body
			ours := readRequestView(raw, 1<<20, method&1 != 0, (*Conn).readRequest)
			ref := readRequestView(raw, 1<<20, method&1 != 0, (*Conn).readRequestSlow)
			if !reflect.DeepEqual(ours, ref) {
				t.Fatalf("readRequest:\n%+v\nreadRequestSlow:\n%+v", ours, ref)
			}
			raw = "HTTP/1.1 200 OK\r\n" + block + body
			req := &http.Request{Method: []string{http.MethodGet, http.MethodHead}[method>>1&1]}
			oursResp, oursRest := readResponseViews(raw, req, method&1 != 0, ReadResponse)
			refResp, refRest := readResponseViews(raw, req, method&1 != 0, http.ReadResponse)
			if !reflect.DeepEqual(oursResp, refResp) || oursRest != refRest {
				t.Fatalf("ReadResponse:\n%+v %q\nhttp.ReadResponse:\n%+v %q", oursResp, oursRest, refResp, refRest)
			}
		}
	})
}
