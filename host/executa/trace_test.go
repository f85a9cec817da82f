package executa

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

// An invoke made under a span hands the plugin that span's traceparent
// in context.traceparent, and the plugin's sampling call is a span under
// it, naming the plugin and the invocation and nothing the plugin wrote.
// Without a span, the context has no traceparent.
func TestInvokeTraceparentAndReverseSpans(t *testing.T) {
	rcv, tr := tracingtest.Start(t, tracing.Options{Service: "executa-test"})
	f := newFixture(t)
	cs := newCompatServices(t, f)
	p := cs.start(t, sdkPython("healthy"))

	if who := invokeData(t, p, "whoami", `{}`); who["traceparent"] != nil {
		t.Fatalf("untraced invoke: context.traceparent %v", who["traceparent"])
	}
	ctx, root := tr.Tracer("test").Start(context.Background(), "caller")
	sc := root.SpanContext()
	r, err := p.Invoke(ctx, InvokeRequest{Tool: "whoami", Arguments: json.RawMessage(`{}`)})
	if err != nil || !r.Success {
		t.Fatalf("whoami: %+v %v", r, err)
	}
	if got, want := data(t, r)["traceparent"], "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01"; got != want {
		t.Fatalf("context.traceparent %v, want %s", got, want)
	}
	r, err = p.Invoke(ctx, InvokeRequest{InvokeID: "inv-traced-1", Tool: "sample_schema", Arguments: json.RawMessage(`{"text":"fine"}`)})
	if err != nil || !r.Success {
		t.Fatalf("sample_schema: %+v %v", r, err)
	}
	root.End()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range rcv.Spans() {
		if s.Name != SpanSampling {
			continue
		}
		found = true
		if s.TraceID != sc.TraceID().String() || s.ParentSpanID != sc.SpanID().String() ||
			s.Attrs["airlock.invocation"] != "inv-traced-1" || s.Attrs["airlock.plugin"] != p.cfg.Name || len(s.Attrs) != 2 {
			t.Fatalf("sampling span %+v", s)
		}
	}
	if !found {
		t.Fatalf("no %s span among %+v", SpanSampling, rcv.Spans())
	}
}

// The OpenAI-compatible backend's request to the model API carries the
// sampling call's traceparent: the egress proxy's request span, and its
// upstream exchange, are in the invocation's trace under the sampling
// span.
func TestSamplingRequestJoinsTrace(t *testing.T) {
	rcv, tr := tracingtest.Start(t, tracing.Options{Service: "executa-test"})
	f := newFixture(t, tr)
	in, _ := f.b.Intent("openai")
	f.sampling = &sampling.OpenAI{BaseURL: "http://api.example.com:" + strconv.Itoa(f.port), Model: "gpt-test", Intent: "openai",
		Destinations: in.Destinations, Broker: f.b, EgressProxy: f.proxy}
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tr.Tracer("test").Start(context.Background(), "caller")
	r, err := p.Invoke(ctx, InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(
		`{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"ping"}}],"maxTokens":20}}`)})
	root.End()
	if err != nil || data(t, r)["code"] != nil {
		t.Fatalf("sampling: %+v %v", r, err)
	}
	// The proxy's request span ends when its audit line is written.
	for !strings.Contains(f.audit.String(), "chat/completions") {
		time.Sleep(10 * time.Millisecond)
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	byName := map[string]tracingtest.Span{}
	for _, s := range rcv.Spans() {
		if s.TraceID != root.SpanContext().TraceID().String() {
			t.Errorf("span %s in trace %s, want the caller's", s.Name, s.TraceID)
		}
		byName[s.Name] = s
	}
	smp, req, ex := byName[SpanSampling], byName["airlock.proxy.request"], byName["airlock.upstream.exchange"]
	if smp.SpanID == "" || req.ParentSpanID != smp.SpanID || req.SpanID == "" || ex.ParentSpanID != req.SpanID {
		t.Fatalf("sampling %q, its proxy request's parent %q (id %q), the exchange's parent %q; spans %+v",
			smp.SpanID, req.ParentSpanID, req.SpanID, ex.ParentSpanID, rcv.Spans())
	}
	if req.Attrs["airlock.plugin"] != p.cfg.Name || req.Attrs["airlock.intent"] != "openai" {
		t.Errorf("proxy request span %v", req.Attrs)
	}
}
