package proxy

import (
	"context"
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
// exchange (request sent to response head). The spans are made when the
// request's audit line is written (finish), from the times the record
// kept, so a request pays for tracing only when it is on: a nil
// *reqTrace records nothing.
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

// reqTrace is what a request's spans are made from.
type reqTrace struct {
	parent    string // the client's traceparent, as sent
	traceID   string // the trace the request's span is in, once made
	phases    []phase
	dialStart time.Time // a new connection's dial began (GetConn)
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
	return a.tr.traceID
}

// traceStart gives a its trace record, once, when tracing is on.
func (s *Server) traceStart(r *http.Request, a *auditRecord) {
	if s.tracer != nil && a.tr == nil {
		a.tr = &reqTrace{parent: r.Header.Get("traceparent")}
	}
}

// now is the time when tracing is on, else zero (not read).
func (t *reqTrace) now() time.Time {
	if t == nil {
		return time.Time{}
	}
	return time.Now()
}

// done records phase name from start to now; failed when err is set.
func (t *reqTrace) done(name string, start time.Time, err error) {
	if t != nil {
		t.phases = append(t.phases, phase{name: name, start: start, end: time.Now(), failed: err != nil})
	}
}

// withDialTrace returns req with a context that records the dial and
// TLS handshake of a new upstream connection: from GetConn to GotConn
// of a connection not reused. The proxy's own HTTP/1.1 client
// (upstream.go) and net/http's transports (HTTP/2, WebSocket) both
// report them.
func (t *reqTrace) withDialTrace(req *http.Request) *http.Request {
	if t == nil {
		return req
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GetConn: func(string) { t.dialStart = time.Now() },
		GotConn: func(info httptrace.GotConnInfo) {
			if !info.Reused && !t.dialStart.IsZero() {
				t.phases = append(t.phases, phase{name: spanDial, start: t.dialStart, end: time.Now()})
			}
			t.dialStart = time.Time{}
		},
	}))
}

// endSpans makes a's spans, ending at now, and names the trace in a's
// audit line. The spans are made even when sampled out (they are not
// recorded then), so the audit line always names a trace id.
func (s *Server) endSpans(a *auditRecord, now time.Time) {
	if a.tr == nil {
		a.tr = &reqTrace{} // refused before a request was read
	}
	ctx := tracing.Parent(context.Background(), a.tr.parent)
	ctx, sp := s.tracer.Start(ctx, spanRequest, trace.WithTimestamp(a.start), trace.WithSpanKind(trace.SpanKindServer))
	a.tr.traceID = sp.SpanContext().TraceID().String()
	if !sp.IsRecording() {
		sp.End()
		return
	}
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
	for _, p := range a.tr.phases {
		kind := trace.SpanKindInternal
		if p.name != spanSecret {
			kind = trace.SpanKindClient
		}
		_, c := s.tracer.Start(ctx, p.name, trace.WithTimestamp(p.start), trace.WithSpanKind(kind))
		if p.failed {
			c.SetStatus(codes.Error, a.Code)
		}
		c.End(trace.WithTimestamp(p.end))
	}
	if !a.tr.dialStart.IsZero() {
		// A dial that never produced a connection.
		_, c := s.tracer.Start(ctx, spanDial, trace.WithTimestamp(a.tr.dialStart), trace.WithSpanKind(trace.SpanKindClient))
		c.SetStatus(codes.Error, a.Code)
		c.End(trace.WithTimestamp(now))
	}
	if a.Code != "" {
		sp.SetStatus(codes.Error, a.Code)
	}
	sp.End(trace.WithTimestamp(now))
}
