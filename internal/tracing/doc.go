// Package tracing is Airlock's OpenTelemetry tracing: one config block
// (`tracing:`), a TracerProvider that exports spans over OTLP/HTTP
// (protobuf) through a bounded queue whose drops are counted, and W3C
// Trace Context (traceparent) read from a caller.
//
// Tracing is off unless tracing.endpoint is set; then New returns nil and
// every method of a nil *Tracing is a no-op, so a component that holds
// one checks a pointer and pays nothing else. An exporter that is down,
// slow or refusing never fails or slows the work it traces: spans go to
// the queue without blocking (a full queue drops them, counted in
// airlock_trace_spans_dropped_total), and the export runs on its own
// goroutine with a timeout.
//
// No span attribute may carry a secret, a credential handle, a token or a
// plugin-supplied value that the audit line would not carry: components
// set only the attributes named in docs/observability.md.
package tracing
