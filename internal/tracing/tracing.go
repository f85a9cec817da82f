package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Defaults of Options.
const (
	DefaultExportTimeout = 10 * time.Second
	DefaultBatchDelay    = time.Second
)

// Options configure New beyond the config block.
type Options struct {
	// Service is the service.name of every span (default "airlock").
	Service string
	// Version is the service.version.
	Version string
	// Logger reports export failures (once per outage); discarded when nil.
	Logger *slog.Logger
	// Registerer takes the tracing metrics; none when nil.
	Registerer prometheus.Registerer
	// ExportTimeout bounds one export (default DefaultExportTimeout);
	// BatchDelay is how long ended spans wait to fill a batch (default
	// DefaultBatchDelay).
	ExportTimeout time.Duration
	BatchDelay    time.Duration
}

// Tracing is a running tracer provider. A nil *Tracing is tracing off:
// its Tracer is a no-op and Shutdown does nothing.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	q      *queue
	client *http.Client
}

// New starts tracing as c says, or returns nil (off) when c has no
// endpoint. c must be valid (Validate).
func New(c Config, o Options) (*Tracing, error) {
	if !c.Enabled() {
		return nil, nil
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	u, _ := tracesURL(c.Endpoint)
	if o.Service == "" {
		o.Service = "airlock"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ExportTimeout <= 0 {
		o.ExportTimeout = DefaultExportTimeout
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = DefaultBatchDelay
	}
	// The exporter's own client, so that Shutdown can close its idle
	// connections.
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(u.String()),
		otlptracehttp.WithHTTPClient(client),
		otlptracehttp.WithTimeout(o.ExportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond,
			MaxInterval: 2 * time.Second, MaxElapsedTime: o.ExportTimeout}))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	q := newQueue(exp, c.QueueSize, o.BatchDelay, o.ExportTimeout, o.Logger)
	t := &Tracing{q: q, client: client}
	if err := t.register(o.Registerer); err != nil {
		_ = q.Shutdown(context.Background())
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", o.Service)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(q),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*c.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return t, nil
}

func (t *Tracing) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	dropped := func(reason string, n func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "airlock_trace_spans_dropped_total",
			Help:        "Spans not exported, by reason: queue_full (the exporter fell behind), export_failed (the receiver refused or did not answer).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(n()) })
	}
	for _, c := range []prometheus.Collector{
		dropped("queue_full", t.q.droppedFull.Load),
		dropped("export_failed", t.q.droppedFailed.Load),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_trace_spans_exported_total", Help: "Spans the OTLP receiver accepted.",
		}, func() float64 { return float64(t.q.exported.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_trace_export_failures_total", Help: "Exports of a batch of spans that failed.",
		}, func() float64 { return float64(t.q.failures.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("tracing: metrics: %w", err)
		}
	}
	return nil
}

// Tracer is the tracer named name; a no-op one when t is nil.
func (t *Tracing) Tracer(name string) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(name)
	}
	return t.tp.Tracer(name)
}

// ForceFlush exports every span ended so far, or returns ctx's error.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.q.ForceFlush(ctx)
}

// Shutdown exports the spans still queued (until ctx ends) and stops;
// the spans ended after it are dropped, uncounted.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := t.tp.Shutdown(ctx)
	t.client.CloseIdleConnections()
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("tracing: spans still queued at shutdown were dropped")
	}
	return err
}

// Stats are the queue's counts.
type Stats struct {
	Exported, DroppedQueueFull, DroppedExportFailed, ExportFailures uint64
}

// Stats returns the queue's counts (zero when t is nil).
func (t *Tracing) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	return Stats{Exported: t.q.exported.Load(), DroppedQueueFull: t.q.droppedFull.Load(),
		DroppedExportFailed: t.q.droppedFailed.Load(), ExportFailures: t.q.failures.Load()}
}

// traceContext reads and writes W3C traceparent.
var traceContext propagation.TraceContext

// Parent returns ctx with the remote span that traceparent (a W3C
// traceparent header's value) names as its parent. Only traceparent is
// read: a caller's tracestate, free text, is never recorded. A missing
// or malformed value leaves ctx as it is (a new trace).
func Parent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, parentCarrier(traceparent))
}

// Traceparent is the W3C traceparent of ctx's span, "" when it has none.
func Traceparent(ctx context.Context) string {
	h := http.Header{}
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	return h.Get("traceparent")
}

// parentCarrier is a carrier holding only a traceparent.
type parentCarrier string

func (p parentCarrier) Get(key string) string {
	if key == "traceparent" {
		return string(p)
	}
	return ""
}
func (parentCarrier) Set(string, string) {}
func (parentCarrier) Keys() []string     { return []string{"traceparent"} }

// Under starts span name as a child of ctx's span, with the tracer of the
// provider that made that span: a component that holds no tracer of its
// own traces only under a caller that traces (with tracing off, or ctx's
// span unsampled, the span records nothing). scope names the tracer
// (the component's import path).
func Under(ctx context.Context, scope, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(scope).Start(ctx, name, opts...)
}
