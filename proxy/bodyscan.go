package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/airlock-dev/airlock/broker"
)

// A handle in a request body would reach the third party as surely as
// one in a header (handlescan.go covers the head). Where the body is
// looked at:
//
//   - a body the proxy holds whole (kept for a replay: an idempotent
//     request or a token processor's, up to MaxReplayBody; or read to be
//     signed by a processor) is scanned before anything is sent, and the
//     request is refused with handle_in_request;
//   - a gRPC request is read message by message (each whole, as the echo
//     guard reads responses) and a message holding a handle is not sent:
//     the call ends with PERMISSION_DENIED handle_in_request;
//   - any other body is scanned as it streams: what could begin a handle
//     is held back until the next read shows whether it is one, so the
//     upload is cut before the handle and the upstream gets an
//     incomplete request, never the handle.
//
// Not looked for: a handle in a compressed gRPC message or in one over
// maxGuardedGRPCMessage (sent unscanned), or a handle encoded in a body
// (base64, percent-encoded); WebSocket messages are scanned in
// websocket.go.

// handleLen is the length of a handle: the prefix and 49 base62 digits.
const handleLen = len(broker.HandlePrefix) + 49

// errHandleInBody ends the upload of a body that holds a handle.
var errHandleInBody = errors.New("a credential handle is in the request body")

// bytesHoldHandle reports whether b holds a handle-shaped token.
func bytesHoldHandle(b []byte) bool {
	prefix := []byte(broker.HandlePrefix)
	for {
		i := bytes.Index(b, prefix)
		if i < 0 {
			return false
		}
		if len(b)-i >= handleLen && handleAt(string(b[i:i+handleLen])) != "" {
			return true
		}
		b = b[i+len(prefix):]
	}
}

// heldHandleTail is how many bytes at the end of b could begin a handle
// (a proper prefix of one) and must wait for the next read.
func heldHandleTail(b []byte) int {
	for i := max(0, len(b)-(handleLen-1)); i < len(b); i++ {
		if handleStart(b[i:]) {
			return len(b) - i
		}
	}
	return 0
}

// handleStart reports whether t is a proper prefix of a handle's form.
func handleStart(t []byte) bool {
	for j, c := range t {
		if j < len(broker.HandlePrefix) && c != broker.HandlePrefix[j] || j >= len(broker.HandlePrefix) && !isBase62(c) {
			return false
		}
	}
	return true
}

// bodyHandleDenial is the refusal once a streamed upload was cut.
func bodyHandleDenial() *denial {
	return deny(CodeHandleInRequest, "a credential handle is in the request body: send it only in Proxy-Authorization "+
		"or in the header the intent substitutes; the upload was cut before the handle")
}

// scanBody makes r's body refuse to hand out a handle: scanned whole
// when the proxy holds it (the denial is returned and nothing is sent),
// message by message for gRPC, and as it streams otherwise (a hit ends
// the upload; x.bodyHandle records it for the answer).
func (x *exchange) scanBody(r *http.Request) *denial {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if x.replay != nil {
		if bytesHoldHandle(x.replay) {
			return handleLeftDenial("the request body")
		}
		return nil
	}
	if isGRPC(r) {
		cut, _ := r.Context().Value(grpcCutKey{}).(*grpcCut)
		r.Body = &grpcRequestScanner{src: r.Body, tr: x.audit.tr, hit: func() {
			x.bodyHandle.Store(true)
			if cut != nil {
				cut.d = bodyHandleDenial()
			}
		}}
		return nil
	}
	r.Body = &bodyScanner{src: r.Body, hit: func() { x.bodyHandle.Store(true) }}
	return nil
}

// bodyScanner streams src, holding back only a tail that could begin a
// handle, and fails with errHandleInBody instead of handing one out.
type bodyScanner struct {
	src  io.ReadCloser
	held []byte // scanned bytes that could begin a handle
	out  []byte // scanned bytes to hand out (after a short read buffer)
	err  error
	hit  func()
}

func (b *bodyScanner) Read(p []byte) (int, error) {
	for {
		if len(b.out) > 0 {
			n := copy(p, b.out)
			b.out = b.out[n:]
			return n, nil
		}
		if b.err != nil {
			return 0, b.err
		}
		buf, small := p, len(p) < 2*handleLen
		if small {
			buf = make([]byte, 4*handleLen)
		}
		n0 := copy(buf, b.held)
		m, err := b.src.Read(buf[n0:])
		data := buf[:n0+m]
		if bytesHoldHandle(data) {
			b.err, b.held = errHandleInBody, nil
			b.hit()
			return 0, b.err
		}
		hold := 0
		if err != nil {
			b.err = err
		} else {
			hold = heldHandleTail(data)
		}
		b.held = append(b.held[:0], data[len(data)-hold:]...)
		ready := data[:len(data)-hold]
		if small {
			b.out = ready
			continue
		}
		if len(ready) > 0 {
			return len(ready), nil
		}
	}
}

func (b *bodyScanner) Close() error { return b.src.Close() }

// grpcRequestScanner reads a gRPC request body message by message, each
// whole, and fails with errHandleInBody instead of handing out a message
// that holds a handle. A message it cannot scan (compressed, or larger
// than maxGuardedGRPCMessage) is passed on as it streams.
type grpcRequestScanner struct {
	src io.ReadCloser
	out []byte // what is left to hand out of the current message
	raw int64  // bytes of an unscanned message still to pass on
	err error
	hit func()
	tr  *reqTrace
}

func (g *grpcRequestScanner) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if g.raw > 0 {
			n, err := g.src.Read(p[:min(int64(len(p)), g.raw)])
			g.raw -= int64(n)
			if err == io.EOF && g.raw > 0 {
				err = io.ErrUnexpectedEOF
			}
			g.err = err
			if n > 0 {
				return n, nil
			}
			continue
		}
		g.fill()
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// fill reads the next message and, when it can be scanned, scans it; one
// it cannot scan is passed on as it streams, and a header the stream
// ends inside is passed on as it came (the upstream judges it).
func (g *grpcRequestScanner) fill() {
	head, n, msg, err := readGRPCMessage(g.src)
	switch {
	case err == nil:
		if bytesHoldHandle(msg[5:]) {
			g.err = errHandleInBody
			g.hit()
			return
		}
		g.tr.message(false, false, int64(n))
		g.out = msg
	case errors.Is(err, errGRPCCompressed), errors.Is(err, errGRPCTooLarge):
		g.tr.message(false, errors.Is(err, errGRPCCompressed), int64(n))
		g.out, g.raw = head, int64(n)
	case len(head) > 0 && len(head) < 5:
		g.out, g.err = head, io.EOF
	default:
		g.err = err
	}
}

func (g *grpcRequestScanner) Close() error { return g.src.Close() }

// bodyHandleCut is the denial for a request whose upload was cut at a
// handle, if it was.
func (x *exchange) bodyHandleCut() *denial {
	if x.bodyHandle.Load() {
		return bodyHandleDenial()
	}
	return nil
}
