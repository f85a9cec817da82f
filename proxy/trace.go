package proxy

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptrace"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/internal/tracing"
)

// Tracing (docs/observability.md): one span per audited request,
// airlock.proxy.request, a child of the plugin's span when the request
// carries a W3C traceparent, with a child span for each secret read, the
// upstream dial and TLS handshake of a new connection, and the upstream
// exchange (request sent to response head). The request span starts
// when the proxy first looks at the request and ends when its audit line
// is written (finish); the child spans are made then too, from the times
// the record kept, and only for a request that is sampled. With tracing
// off a request pays nil checks: a nil *reqTrace records nothing.
//
// The traceparent goes upstream as the client sent it: the proxy never
// rewrites a client's bytes, so it does not put its own span in the
// header; an upstream's spans are siblings of the proxy's, under the
// plugin's span.
//
// A span carries what the audit line carries and less: no secret,
// handle, token, path or query, reason text, or other header.

// Span names.
const (
	spanRequest  = "airlock.proxy.request"
	spanSecret   = "airlock.secret.read"
	spanDial     = "airlock.upstream.dial"
	spanExchange = "airlock.upstream.exchange"
)

// reqTrace is a request's span and what its child spans are made from.
type reqTrace struct {
	ctx  context.Context // holds span
	span trace.Span
	id   trace.TraceID // for the audit line (trace_id), sampled or not
	// recording: the span is sampled; the phases are kept only then.
	recording bool
	phases    []phase
	dialStart time.Time // a new connection's dial began (GetConn)
	msgs      messages  // a stream's messages (trace_streams.go)
}

// phase is a child span: name, its times, and whether it failed.
type phase struct {
	name       string
	start, end time.Time
	failed     bool
}

// traceID is the request's trace id, "" with tracing off.
func (a *auditRecord) traceID() string {
	if a.tr == nil {
		return ""
	}
	return a.tr.id.String()
}

// appendTraceID appends the line's trace_id field when tracing is on.
func (a *auditRecord) appendTraceID(b []byte) []byte {
	if a.tr == nil || !a.tr.id.IsValid() {
		return b
	}
	b = append(b, `,"trace_id":"`...)
	b = hex.AppendEncode(b, a.tr.id[:])
	return append(b, '"')
}

// serverSpan is the request span's start option, boxed once: every
// request of a process that traces pays the span's start, sampled or not,
// and an option built per request is an allocation.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// traceStart starts a's request span, once, when tracing is on: a child
// of the span r's traceparent names (r may be nil: none, and the span is
// started late, for a request refused before any handler saw it: it
// starts at the request's start).
func (s *Server) traceStart(r *http.Request, a *auditRecord) {
	if s.tracer == nil || a.tr != nil {
		return
	}
	ctx := context.Background()
	opts := serverSpan
	if r != nil {
		// Indexed, not Get: no canonicalization on the request path.
		if v := r.Header["Traceparent"]; len(v) > 0 {
			ctx = tracing.Parent(ctx, v[0])
		}
	} else {
		opts = []trace.SpanStartOption{trace.WithTimestamp(a.start), serverSpan[0]}
	}
	ctx, sp := s.tracer.Start(ctx, spanRequest, opts...)
	a.tr = &reqTrace{ctx: ctx, span: sp, id: sp.SpanContext().TraceID(), recording: sp.IsRecording()}
}

// now is the time when the request is traced, else zero (not read).
func (t *reqTrace) now() time.Time {
	if t == nil || !t.recording {
		return time.Time{}
	}
	return time.Now()
}

// under is ctx carrying the request span when the request is recorded,
// so that a span the broker makes during it (a Vault lease obtained for
// the secret read) joins the request's trace; ctx as it is otherwise.
func (t *reqTrace) under(ctx context.Context) context.Context {
	if t == nil || !t.recording {
		return ctx
	}
	return trace.ContextWithSpan(ctx, t.span)
}

// done records phase name from start to now; failed when err is set.
func (t *reqTrace) done(name string, start time.Time, err error) {
	if t != nil && t.recording {
		t.phases = append(t.phases, phase{name: name, start: start, end: time.Now(), failed: err != nil})
	}
}

// withDialTrace returns req with a context that records the dial and
// TLS handshake of a new upstream connection: from GetConn to GotConn
// of a connection not reused. The proxy's own HTTP/1.1 client
// (upstream.go) and net/http's transports (HTTP/2, WebSocket) both
// report them.
func (t *reqTrace) withDialTrace(req *http.Request) *http.Request {
	if t == nil || !t.recording {
		return req
	}
	return req.WithContext(t.dialContext(req.Context()))
}

// dialContext is ctx with withDialTrace's hooks, for a client that takes
// a context (the WebSocket dial); ctx as it is when not recording.
func (t *reqTrace) dialContext(ctx context.Context) context.Context {
	if t == nil || !t.recording {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { t.dialStart = time.Now() },
		GotConn: func(info httptrace.GotConnInfo) {
			if !info.Reused && !t.dialStart.IsZero() {
				t.phases = append(t.phases, phase{name: spanDial, start: t.dialStart, end: time.Now()})
			}
			t.dialStart = time.Time{}
		},
	})
}

// endSpans ends a's request span at now, with its attributes and child
// spans when it is sampled.
func (s *Server) endSpans(a *auditRecord, now time.Time) {
	s.traceStart(nil, a) // refused before any handler saw the request
	t := a.tr
	if !t.recording {
		t.span.End()
		return
	}
	sp := t.span
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		attribute.String("airlock.plugin", a.Plugin),
		attribute.String("airlock.mode", a.Mode),
		attribute.String("http.request.method", a.Method),
		attribute.String("server.address", a.Host),
		attribute.Int("http.response.status_code", a.Status),
		attribute.String("airlock.decision", a.decision()),
	)
	if a.Port > 0 {
		attrs = append(attrs, attribute.Int("server.port", a.Port))
	}
	for _, kv := range [...]struct{ k, v string }{
		{"airlock.invocation", a.Invocation}, {"airlock.intent", a.Intent}, {"airlock.handle_fp", a.HandleFP},
		{"airlock.code", a.Code}, {"airlock.processor", a.Processor},
	} {
		if kv.v != "" {
			attrs = append(attrs, attribute.String(kv.k, kv.v))
		}
	}
	if a.AddrClass != addrUnknown {
		attrs = append(attrs, attribute.String("airlock.addr_class", a.AddrClass.String()))
	}
	if a.Retried {
		attrs = append(attrs, attribute.Bool("airlock.retried", true))
	}
	sp.SetAttributes(attrs...)
	for _, p := range t.phases {
		kind := trace.SpanKindInternal
		if p.name != spanSecret {
			kind = trace.SpanKindClient
		}
		_, c := s.tracer.Start(t.ctx, p.name, trace.WithTimestamp(p.start), trace.WithSpanKind(kind))
		if p.failed {
			c.SetStatus(codes.Error, a.Code)
		}
		c.End(trace.WithTimestamp(p.end))
	}
	if !t.dialStart.IsZero() {
		// A dial that never produced a connection.
		_, c := s.tracer.Start(t.ctx, spanDial, trace.WithTimestamp(t.dialStart), trace.WithSpanKind(trace.SpanKindClient))
		c.SetStatus(codes.Error, a.Code)
		c.End(trace.WithTimestamp(now))
	}
	t.traceGRPC(sp)
	if a.Code != "" {
		sp.SetStatus(codes.Error, a.Code)
	}
	sp.End(trace.WithTimestamp(now))
}
