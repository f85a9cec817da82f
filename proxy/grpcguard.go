package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
)

// The echo guard on a gRPC response works message by message. The byte
// stream guard (echo.go) holds back a tail that could begin a secret
// until more arrives; on a bidirectional call that waits for each answer
// before it sends the next message, a message ending in such bytes would
// never be delivered. A gRPC body is length-prefixed messages, so each
// message is read whole (up to maxGuardedGRPCMessage), scanned, and
// handed on at once; lengths do not change, so the message still
// decodes. A secret split across two messages is caught too: the part
// in the later message is masked (the earlier part, shorter than the
// secret, was already delivered). A compressed message cannot be
// scanned: the call ends with UNAVAILABLE (response_encoding_unsupported),
// and the proxy asks upstreams for identity (grpc-accept-encoding).

// maxGuardedGRPCMessage is the largest gRPC message the guard buffers:
// gRPC's own default receive limit.
const maxGuardedGRPCMessage = 4 << 20

var (
	errGRPCCompressed = errors.New("a compressed gRPC message cannot be scanned by the echo guard")
	errGRPCTooLarge   = errors.New("a gRPC message is larger than the echo guard buffers")
	errGRPCFraming    = errors.New("the upstream's gRPC message framing is broken")
)

// grpcGuard redacts secret forms in each gRPC message read from src.
type grpcGuard struct {
	src   io.Reader
	guard messageGuard
	hits  *int      // the audit record's redaction count
	cut   *grpcCut  // where a failure is reported, for the status
	tr    *reqTrace // each message read is an event of the traced request
	out   []byte    // what is left to hand out of the current message
	err   error
}

// messageGuard is the echo guard for a stream of whole messages (gRPC,
// WebSocket): each message is scanned and handed on at once.
type messageGuard struct {
	forms *echoForms
	tail  []byte // the end of the previous message, for split secrets
}

// grpcCut records why a guarded gRPC response ended early, so the stream
// can end with a status that says so.
type grpcCut struct{ d *denial }

type grpcCutKey struct{}

// withGRPCCut returns ctx carrying a fresh grpcCut.
func withGRPCCut(ctx context.Context) (context.Context, *grpcCut) {
	c := &grpcCut{}
	return context.WithValue(ctx, grpcCutKey{}, c), c
}

func newGRPCGuard(ctx context.Context, src io.Reader, forms *echoForms, hits *int, tr *reqTrace) *grpcGuard {
	cut, _ := ctx.Value(grpcCutKey{}).(*grpcCut)
	if cut == nil {
		cut = &grpcCut{}
	}
	return &grpcGuard{src: src, guard: messageGuard{forms: forms}, hits: hits, cut: cut, tr: tr}
}

func (g *grpcGuard) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		g.fill()
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// fill reads and scans the next message.
func (g *grpcGuard) fill() {
	_, _, msg, err := readGRPCMessage(g.src)
	if err != nil {
		g.fail(err)
		return
	}
	*g.hits += g.guard.redact(msg[5:])
	g.tr.message(true, false, int64(len(msg)-5))
	g.out = msg
}

// readGRPCMessage reads one length-prefixed gRPC message from src: the
// bytes of its header and, when the message is uncompressed and at most
// maxGuardedGRPCMessage bytes, the whole message, header included.
// errGRPCCompressed or errGRPCTooLarge say why it was not read (the
// header returned, n the payload's length, the payload left in src); a
// stream that ends inside the header returns the bytes read of it with
// io.ErrUnexpectedEOF, one that ends inside the payload
// io.ErrUnexpectedEOF, and one that ends before the header io.EOF.
func readGRPCMessage(src io.Reader) (head []byte, n uint32, msg []byte, err error) {
	var hdr [5]byte
	k, err := io.ReadFull(src, hdr[:])
	if err != nil {
		return append([]byte(nil), hdr[:k]...), 0, nil, err
	}
	head = append([]byte(nil), hdr[:]...)
	n = binary.BigEndian.Uint32(hdr[1:])
	switch {
	case hdr[0]&1 != 0:
		return head, n, nil, errGRPCCompressed
	case n > maxGuardedGRPCMessage:
		return head, n, nil, errGRPCTooLarge
	}
	msg = make([]byte, 5+int(n))
	copy(msg, hdr[:])
	if _, err := io.ReadFull(src, msg[5:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the stream ended inside a message
		}
		return head, n, nil, err
	}
	return head, n, msg, nil
}

func (g *grpcGuard) fail(err error) {
	switch {
	case err == io.EOF:
	case errors.Is(err, errGRPCCompressed):
		g.cut.d = deny(CodeUnscannable, "the upstream sent a compressed gRPC message, which the echo guard cannot scan")
	case errors.Is(err, errGRPCTooLarge):
		g.cut.d = deny(CodeUnscannable, "the upstream sent a gRPC message larger than the echo guard scans")
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = errGRPCFraming
	}
	g.err = err
}

// redact masks the secret forms in one message's payload, also where a
// form began at the end of the previous message, and returns how many
// it found.
func (g *messageGuard) redact(payload []byte) int {
	hits := redactInPlace(payload, g.forms.pats)
	if k := g.forms.keep; k > 0 {
		if len(g.tail) > 0 {
			head := payload[:min(len(payload), k)]
			joined := append(append(make([]byte, 0, len(g.tail)+len(head)), g.tail...), head...)
			for _, p := range g.forms.pats {
				for i := max(0, len(g.tail)-len(p)+1); i < len(g.tail) && i+len(p) <= len(joined); i++ {
					if string(joined[i:i+len(p)]) == string(p) {
						copy(payload[:i+len(p)-len(g.tail)], mask(i+len(p)-len(g.tail)))
						hits++
					}
				}
			}
		}
		g.tail = append(g.tail, payload...)
		g.tail = append(g.tail[:0:0], g.tail[max(0, len(g.tail)-k):]...)
	}
	return hits
}
