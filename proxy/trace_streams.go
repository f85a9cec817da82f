package proxy

import (
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Streams (docs/observability.md). A gRPC call's messages are events on
// its request span, each with its direction, number and size (never its
// bytes): plugin to upstream always (the handle scan reads them), upstream
// to plugin when the echo guard reads them. A relayed WebSocket is a span
// of its own, airlock.websocket, under its handshake's request span, from
// the 101 to the close, with its messages as events and what the closing
// audit line counts as attributes. A span keeps the first
// maxMessageEvents messages; the counts cover all of them.

const (
	spanWebSocket    = "airlock.websocket"
	eventMessage     = "rpc.message"
	maxMessageEvents = 64
)

// messages are a stream's message events, recorded by the goroutines that
// read each direction.
type messages struct {
	mu             sync.Mutex
	sent, received int64
	events         []msgEvent
}

type msgEvent struct {
	at         time.Time
	received   bool // upstream to plugin
	compressed bool // the size is the compressed size
	id         int64
	size       int64
}

// message records one message of size bytes, read now, when the request
// is traced: received from the upstream, or sent to it.
func (t *reqTrace) message(received, compressed bool, size int64) {
	t.messageAt(t.now(), received, compressed, size)
}

// messageAt records one message read at (t.now()) and relayed since.
func (t *reqTrace) messageAt(at time.Time, received, compressed bool, size int64) {
	if t == nil || !t.recording {
		return
	}
	m := &t.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	n := &m.sent
	if received {
		n = &m.received
	}
	*n++
	if len(m.events) < maxMessageEvents {
		m.events = append(m.events, msgEvent{at: at, received: received, compressed: compressed, id: *n, size: size})
	}
}

// endMessages adds the recorded message events to sp and returns the
// counts.
func (t *reqTrace) endMessages(sp trace.Span) (sent, received int64) {
	m := &t.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	// In the order the messages were read: each direction's goroutine
	// records its message once relayed, and an answer may be recorded
	// before the message it answers.
	slices.SortStableFunc(m.events, func(a, b msgEvent) int { return a.at.Compare(b.at) })
	for _, e := range m.events {
		typ, size := "SENT", "rpc.message.uncompressed_size"
		if e.received {
			typ = "RECEIVED"
		}
		if e.compressed {
			size = "rpc.message.compressed_size"
		}
		sp.AddEvent(eventMessage, trace.WithTimestamp(e.at), trace.WithAttributes(
			attribute.String("rpc.message.type", typ), attribute.Int64("rpc.message.id", e.id), attribute.Int64(size, e.size)))
	}
	return m.sent, m.received
}

// traceGRPC adds a gRPC call's message events and counts to its request
// span (nothing for a request with no message).
func (t *reqTrace) traceGRPC(sp trace.Span) {
	if sent, received := t.endMessages(sp); sent+received > 0 {
		sp.SetAttributes(attribute.String("rpc.system", "grpc"),
			attribute.Int64("airlock.grpc.messages_sent", sent), attribute.Int64("airlock.grpc.messages_received", received))
	}
}

// wsFailures are the closes a WebSocket's span marks as errors: Airlock
// ended the socket for a rule, not a peer or an idle timer.
var wsFailures = map[string]bool{"revoked": true, "handle_in_request": true, "limit": true}

// traceWebSocket makes a relayed socket's span, when its handshake was
// traced: from st.opened to now, its messages as events.
func (s *Server) traceWebSocket(a *auditRecord, st *wsStats, now time.Time) {
	t := a.tr
	if t == nil || !t.recording {
		return
	}
	_, sp := s.tracer.Start(t.ctx, spanWebSocket, trace.WithTimestamp(st.opened), trace.WithAttributes(
		attribute.String("airlock.plugin", a.Plugin),
		attribute.String("airlock.websocket.closed_by", st.closedBy),
		attribute.Int("airlock.websocket.close_code", int(st.closeCode)),
		attribute.Int64("airlock.websocket.messages_up", st.msgsUp.Load()),
		attribute.Int64("airlock.websocket.messages_down", st.msgsDown.Load()),
		attribute.Int64("airlock.websocket.bytes_up", st.bytesUp.Load()),
		attribute.Int64("airlock.websocket.bytes_down", st.bytesDown.Load()),
		attribute.Int64("airlock.echo_redactions", st.redactions.Load()),
	))
	t.endMessages(sp)
	if wsFailures[st.closedBy] {
		sp.SetStatus(codes.Error, st.closedBy)
	}
	sp.End(trace.WithTimestamp(now))
}
