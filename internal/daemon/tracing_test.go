package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

// Serve with tracing on exports a span for each proxied request, in the
// trace of the plugin's traceparent; the spans still queued when Serve
// stops are exported before it returns, its exporter goroutine has ended
// by then, and the audit line names the trace. The drop counters are on
// /metrics.
func TestServeTracing(t *testing.T) {
	rcv := tracingtest.NewReceiver(t) // before the goroutine check: it outlives Serve
	leaks := testenv.CheckGoroutines(t)
	cfg := testConfig(t)
	cfg.Tracing.Endpoint = rcv.URL()
	audit := &testenv.SyncBuffer{}
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, cfg, Options{AuditOut: audit, OnReady: func(r Ready) { ready <- r }})
	}()
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("GET", "http://api.example.com/v1/x", nil)
	req.Header.Set("Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	tr := &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse("http://" + r.Proxy) }}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("no handle: %d", resp.StatusCode)
	}
	mresp, err := client.Get("http://" + r.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(metrics), `airlock_trace_spans_dropped_total{reason="queue_full"} 0`) {
		t.Errorf("/metrics lacks the span drop counter")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].TraceID != trace || spans[0].ParentSpanID != "00f067aa0ba902b7" ||
		spans[0].Service != "airlock-serve" || spans[0].Attrs["airlock.code"] != "handle_missing" {
		t.Fatalf("spans at exit: %+v", spans)
	}
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "egress" && m["trace_id"] == trace {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit line names the trace:\n%s", audit.String())
	}
	leaks()
}

// With tracing on, each control-API call of airlock host is a span in
// the caller's trace, refused calls included; its resource names no id;
// the host's spans are exported by the time it has stopped.
func TestHostControlTracing(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	cfg := testConfig(t)
	cfg.Tracing.Endpoint = rcv.URL()
	startServeForHost(t, cfg)
	stop, err := runHost(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, base := controlClient(cfg)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	call := func(c *http.Client, path string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := call(c, "/v1/plugins"); code != http.StatusOK {
		t.Fatalf("GET /v1/plugins: %d", code)
	}
	if code := call(c, "/v1/grants/g-secret-id"); code == http.StatusOK {
		t.Fatalf("GET of an unknown grant: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rcv.Spans() {
		if s.Name != spanControl {
			continue
		}
		if s.TraceID != trace || s.ParentSpanID != "00f067aa0ba902b7" || s.Service != "airlock-host" {
			t.Errorf("control span in trace %s under %s of %s", s.TraceID, s.ParentSpanID, s.Service)
		}
		for _, v := range s.Strings() {
			if strings.Contains(v, "g-secret-id") {
				t.Errorf("a control span carries the path's id: %q", v)
			}
		}
		got = append(got, s.Attrs["http.request.method"]+" "+s.Attrs["airlock.control.resource"]+" "+s.Attrs["http.response.status_code"])
	}
	if len(got) != 2 || got[0] != "GET /v1/plugins 200" || !strings.HasPrefix(got[1], "GET /v1/grants ") {
		t.Errorf("control spans %q", got)
	}
}

// The control API's writer, wrapped for its span, still flushes and
// reaches the connection (NDJSON streams, MCP's ResponseController).
func TestTraceControlWriterFlushes(t *testing.T) {
	_, tr := tracingtest.Start(t, tracing.Options{})
	errs := make(chan error, 1)
	srv := httptest.NewServer(traceControl(tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			errs <- err
			return
		}
		_, _ = io.WriteString(w, "line\n")
		if _, ok := w.(http.Flusher); !ok {
			errs <- errors.New("not an http.Flusher")
			return
		}
		errs <- rc.Flush()
	})))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/v1/invocations")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	srv.Client().CloseIdleConnections()
}
