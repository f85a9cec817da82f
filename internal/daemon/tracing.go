package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// tracingShutdown bounds the export of the spans still queued at exit.
const tracingShutdown = 5 * time.Second

// startTracing starts the tracer provider of cfg.Tracing (nil when
// off) for the proxy's spans. It is shut down after the listeners have
// stopped (closers run last added first, after the goroutines end): the
// queued spans are exported, for at most tracingShutdown, and the
// exporter's goroutine has ended when the node has stopped.
func (n *serveNode) startTracing(cfg *config.Config, version string) error {
	tr, err := tracing.New(cfg.Tracing, tracing.Options{Service: "airlock-serve", Version: version, Logger: n.log, Registerer: n.registry})
	if err != nil || tr == nil {
		return err
	}
	n.tracing = tr
	n.closers = append(n.closers, shutdownTracing(tr, n.log))
	n.log.Info("tracing on: spans are exported over OTLP/HTTP", "endpoint", cfg.Tracing.Endpoint, "sample_ratio", *cfg.Tracing.SampleRatio)
	return nil
}

// startHostTracing is the host's tracer provider: Dev's Serve's (shut
// down with it), or the host's own from cfg.Tracing, with its metrics in
// the host's registry, shut down after the control API stops.
func (n *hostNode) startHostTracing(cfg *config.Config, deps hostDeps, reg prometheus.Registerer, version string) error {
	if deps.admin != nil {
		n.tracing = deps.tracing
		return nil
	}
	tr, err := tracing.New(cfg.Tracing, tracing.Options{Service: "airlock-host", Version: version, Logger: n.log, Registerer: reg})
	if err != nil || tr == nil {
		return err
	}
	n.tracing = tr
	n.closers = append(n.closers, shutdownTracing(tr, n.log))
	return nil
}

// spanControl is the span of one control-API call (MCP included).
const spanControl = "airlock.control"

// traceControl makes a span of each control-API call, before the caller
// is authenticated (a refused call has its span too): a child of the
// caller's traceparent. Its attributes are the method, the status and
// the resource: the path's first two segments ("/v1/invocations",
// "/v1/grants"), never a name, id or query after them.
func traceControl(tr *tracing.Tracing, next http.Handler) http.Handler {
	if tr == nil {
		return next
	}
	tracer := tr.Tracer("github.com/airlock-dev/airlock/host/control")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if v := r.Header["Traceparent"]; len(v) > 0 {
			ctx = tracing.Parent(ctx, v[0])
		}
		ctx, sp := tracer.Start(ctx, spanControl, trace.WithSpanKind(trace.SpanKindServer))
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			sp.SetAttributes(attribute.String("http.request.method", r.Method),
				attribute.String("airlock.control.resource", controlResource(r.URL.Path)),
				attribute.Int("http.response.status_code", status))
			if status >= 500 {
				sp.SetStatus(codes.Error, http.StatusText(status))
			}
			sp.End()
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// controlResource is path up to its second segment.
func controlResource(path string) string {
	segs := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 3)
	if len(segs) > 2 {
		segs = segs[:2]
	}
	return "/" + strings.Join(segs, "/")
}

// statusWriter records the status a handler wrote; it flushes (NDJSON
// streams, MCP) and unwraps (http.ResponseController) to the writer it
// wraps.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// shutdownTracing is the closer that exports what is queued, for at most
// tracingShutdown, and ends the exporter.
func shutdownTracing(tr *tracing.Tracing, log *slog.Logger) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			log.Warn("tracing: shutdown", "error", err.Error())
		}
	}
}
