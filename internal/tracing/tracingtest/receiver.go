// Package tracingtest is an OTLP/HTTP trace receiver for tests: it
// decodes what an exporter posts with the OTLP protobuf definitions
// alone, independently of the exporter that sent it.
package tracingtest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/internal/tracing"
)

// Span is one received span, ids in lowercase hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          tracepb.Span_SpanKind
	// Attrs are the span's attributes, values as strings.
	Attrs map[string]string
	// Service is the resource's service.name.
	Service string
	// Raw is the span as decoded.
	Raw *tracepb.Span
	// Resource holds the resource's attributes.
	Resource map[string]string
}

// Receiver accepts OTLP/HTTP protobuf at /v1/traces.
type Receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []Span
	// header is the last post's header.
	header http.Header
}

// NewReceiver starts a receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.traces)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

// Start starts a receiver and tracing (with o) that exports to it; the
// tracing is shut down when the test ends, after what the test set up
// later has stopped.
func Start(t testing.TB, o tracing.Options) (*Receiver, *tracing.Tracing) {
	t.Helper()
	rcv := NewReceiver(t)
	tr, err := tracing.New(tracing.Config{Endpoint: rcv.URL()}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return rcv, tr
}

// URL is the receiver's base URL (the exporter appends /v1/traces).
func (r *Receiver) URL() string { return r.srv.URL }

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.got...)
}

// Header is the header of the last post, nil before any.
func (r *Receiver) Header() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header
}

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest", http.StatusBadRequest)
		return
	}
	var spans []Span
	for _, rs := range msg.ResourceSpans {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans = append(spans, Span{
					TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Kind: s.Kind,
					Attrs: attrMap(s.Attributes), Service: res["service.name"], Raw: s, Resource: res,
				})
			}
		}
	}
	r.mu.Lock()
	r.got = append(r.got, spans...)
	r.header = req.Header.Clone()
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = valueString(kv.Value)
	}
	return m
}

// valueString is a string or int value as it is; any other kind as the
// value's prototext (nested values included).
func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.String()
}

// Strings is every string a span carries that is not an id: names,
// attribute keys and values (the span's, its events', links' and
// resource's), status message and trace state. A test greps them for
// what must never be exported.
func (s Span) Strings() []string {
	out := []string{s.Name, s.Raw.GetTraceState(), s.Raw.GetStatus().GetMessage()}
	add := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.Key, kv.Value.String())
		}
	}
	add(s.Raw.Attributes)
	for _, e := range s.Raw.Events {
		out = append(out, e.Name)
		add(e.Attributes)
	}
	for _, l := range s.Raw.Links {
		out = append(out, l.TraceState)
		add(l.Attributes)
	}
	for k, v := range s.Resource {
		out = append(out, k, v)
	}
	return out
}

// DeadEndpoint is the URL of a port nothing listens on.
func DeadEndpoint(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// HangingEndpoint is the URL of a receiver that accepts requests and
// never answers until the test ends; arrived gets a value for each
// request, once it has arrived.
func HangingEndpoint(t testing.TB) (url string, arrived <-chan struct{}) {
	release := make(chan struct{})
	got := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, got
}
