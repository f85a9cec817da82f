package tracing_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }

func newTracing(t *testing.T, c tracing.Config, o tracing.Options) *tracing.Tracing {
	t.Helper()
	tr, err := tracing.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr
}

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A span started under a caller's traceparent reaches the receiver in
// the caller's trace, as the child of the caller's span; its service is
// named.
func TestSpanJoinsCallersTrace(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	tr := newTracing(t, tracing.Config{Endpoint: rcv.URL()}, tracing.Options{Service: "airlock-test", Version: "v9"})
	ctx := tracing.Parent(context.Background(), parent)
	_, sp := tr.Tracer("test").Start(ctx, "work", trace.WithSpanKind(trace.SpanKindServer))
	sp.End()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 {
		t.Fatalf("received %d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.ParentSpanID != "00f067aa0ba902b7" || s.Name != "work" {
		t.Errorf("span %s in trace %s under %s; want work in the caller's trace under its span", s.Name, s.TraceID, s.ParentSpanID)
	}
	if s.Service != "airlock-test" || s.Resource["service.version"] != "v9" {
		t.Errorf("resource %v", s.Resource)
	}
	if st := tr.Stats(); st.Exported != 1 {
		t.Errorf("stats %+v, want 1 exported", st)
	}
}

// A collector's authentication header comes from the standard OTLP
// variables, so that it need not sit in the config file.
func TestHeadersFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-collector-key=k1")
	rcv := tracingtest.NewReceiver(t)
	tr := newTracing(t, tracing.Config{Endpoint: rcv.URL()}, tracing.Options{})
	_, sp := tr.Tracer("test").Start(context.Background(), "work")
	sp.End()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rcv.Header().Get("X-Collector-Key"); got != "k1" {
		t.Errorf("the receiver got header %q", got)
	}
}

// Only traceparent is read: the caller's tracestate is never exported,
// and a malformed traceparent starts a new trace.
func TestParent(t *testing.T) {
	if sc := trace.SpanContextFromContext(tracing.Parent(context.Background(), "00-zz-00f067aa0ba902b7-01")); sc.IsValid() {
		t.Error("a malformed traceparent named a parent")
	}
	if sc := trace.SpanContextFromContext(tracing.Parent(context.Background(), "")); sc.IsValid() {
		t.Error("no traceparent named a parent")
	}
	sc := trace.SpanContextFromContext(tracing.Parent(context.Background(), parent))
	if !sc.IsRemote() || !sc.IsSampled() || sc.TraceState().Len() != 0 {
		t.Errorf("parent %v", sc)
	}
	if got := tracing.Traceparent(trace.ContextWithSpanContext(context.Background(), sc)); got != parent {
		t.Errorf("Traceparent = %q, want %q", got, parent)
	}
}

// A receiver that refuses connections fails nothing: spans end as
// always, the failed export drops them and counts it.
func TestDeadReceiverCountsDrops(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := newTracing(t, tracing.Config{Endpoint: tracingtest.DeadEndpoint(t)}, tracing.Options{Registerer: reg, ExportTimeout: time.Second})
	for range 3 {
		_, sp := tr.Tracer("test").Start(context.Background(), "work")
		sp.End()
	}
	_ = tr.ForceFlush(context.Background())
	st := tr.Stats()
	if st.DroppedExportFailed != 3 || st.ExportFailures == 0 || st.Exported != 0 {
		t.Errorf("stats %+v, want 3 spans dropped by a failed export", st)
	}
	if n := metric(t, reg, "airlock_trace_spans_dropped_total", "export_failed"); n != 3 {
		t.Errorf("airlock_trace_spans_dropped_total{reason=export_failed} = %v, want 3", n)
	}
}

// A receiver that never answers fills the bounded queue: further spans
// are dropped and counted, ending a span never blocks, and Shutdown
// returns once its own deadline passes.
func TestHangingReceiverFillsQueue(t *testing.T) {
	url, arrived := tracingtest.HangingEndpoint(t)
	tr, err := tracing.New(tracing.Config{Endpoint: url, QueueSize: 1},
		tracing.Options{ExportTimeout: time.Hour, BatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tr.Tracer("test").Start(context.Background(), "first")
	sp.End()
	<-arrived // the exporter is stuck on the first span
	for range 20 {
		_, sp := tr.Tracer("test").Start(context.Background(), "work")
		sp.End()
	}
	// One queued, the rest dropped.
	if st := tr.Stats(); st.DroppedQueueFull != 19 {
		t.Errorf("stats %+v, want 19 dropped with a full queue", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tr.Shutdown(ctx); err == nil {
		t.Error("Shutdown with spans stuck in a hanging export returned no error")
	}
}

// Off (no endpoint): New returns nil, and a nil Tracing is a no-op.
func TestOff(t *testing.T) {
	tr, err := tracing.New(tracing.Config{}, tracing.Options{})
	if err != nil || tr != nil {
		t.Fatalf("New(off) = %v, %v", tr, err)
	}
	_, sp := tr.Tracer("x").Start(context.Background(), "work")
	if sp.IsRecording() {
		t.Error("a span of tracing off records")
	}
	sp.End()
	if err := tr.Shutdown(context.Background()); err != nil || tr.ForceFlush(context.Background()) != nil {
		t.Error("nil Tracing failed")
	}
}

// Sampled out, a span still has a trace id (the audit line names it)
// and is neither queued nor counted.
func TestSampledOut(t *testing.T) {
	zero := 0.0
	rcv := tracingtest.NewReceiver(t)
	tr := newTracing(t, tracing.Config{Endpoint: rcv.URL(), SampleRatio: &zero}, tracing.Options{})
	_, sp := tr.Tracer("x").Start(context.Background(), "work")
	sp.End()
	if !sp.SpanContext().TraceID().IsValid() {
		t.Error("a sampled-out span has no trace id")
	}
	_ = tr.ForceFlush(context.Background())
	if n := len(rcv.Spans()); n != 0 || tr.Stats() != (tracing.Stats{}) {
		t.Errorf("sampled out: %d spans received, stats %+v", n, tr.Stats())
	}
	// A sampled caller is followed all the same.
	_, sp = tr.Tracer("x").Start(tracing.Parent(context.Background(), parent), "work")
	sp.End()
	_ = tr.ForceFlush(context.Background())
	if n := len(rcv.Spans()); n != 1 {
		t.Errorf("a sampled caller's child: %d spans received, want 1", n)
	}
}

func TestValidate(t *testing.T) {
	bad := 1.5
	for _, tc := range []struct {
		c    tracing.Config
		want string
	}{
		{tracing.Config{Endpoint: "collector:4318"}, "tracing.endpoint: must be an http or https URL"},
		{tracing.Config{Endpoint: "ftp://collector"}, "tracing.endpoint: must be an http or https URL"},
		{tracing.Config{Endpoint: "https://user:pw@collector"}, "tracing.endpoint: must not hold credentials"},
		{tracing.Config{Endpoint: "https://collector/?k=v"}, "tracing.endpoint: must not have a query"},
		{tracing.Config{Endpoint: "https://"}, "tracing.endpoint: must name a host"},
		{tracing.Config{SampleRatio: &bad}, "tracing.sample_ratio"},
		{tracing.Config{QueueSize: -1}, "tracing.queue_size"},
		{tracing.Config{QueueSize: tracing.MaxQueueSize + 1}, "tracing.queue_size"},
	} {
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("%v quotes the endpoint's password", err)
		}
	}
	if err := (tracing.Config{Endpoint: "http://127.0.0.1:4318"}).WithDefaults().Validate(); err != nil {
		t.Error(err)
	}
}

// metric is the value of name{reason} in reg.
func metric(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", name, reason)
	return 0
}
