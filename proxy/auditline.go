package proxy

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/auditlog"
	"github.com/airlock-dev/airlock/internal/jsonenc"
)

// AuditSink takes the proxy's audit lines: one JSON line per request,
// built without reflection (appendLine) and handed over whole. An
// *auditlog.Writer is one: it writes off the request path.
type AuditSink interface {
	// WriteLine takes one complete line, newline included; it must not
	// keep line after it returns.
	WriteLine(line []byte)
	// Saturated reports that audit lines are being lost (the output
	// stalled): the proxy then refuses requests, since egress without
	// its record is what the audit log exists to prevent.
	Saturated() bool
}

var _ AuditSink = (*auditlog.Writer)(nil)

// lineBufs recycles the buffers lines are built in.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 768); return &b }}

// writeLine builds a's line and hands it to sink.
func (a *auditRecord) writeLine(sink AuditSink, now time.Time) {
	bp := lineBufs.Get().(*[]byte)
	b := a.appendLine((*bp)[:0], now)
	sink.WriteLine(b)
	if cap(b) <= 64<<10 {
		*bp = b
		lineBufs.Put(bp)
	}
}

// appendLine appends a's audit line: the fields, names and order of the
// log/slog JSON line the proxy wrote before (a JSON handler's time, level
// and msg, then log=audit and the record), so that every reader of the
// audit log reads it unchanged. TestAuditLineMatchesEncodingJSON holds it
// to encoding/json's output for the same record.
func (a *auditRecord) appendLine(b []byte, now time.Time) []byte {
	b = append(b, `{"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"egress","log":"audit","plugin":`...)
	b = jsonenc.AppendString(b, a.Plugin)
	b = append(b, `,"invocation":`...)
	b = jsonenc.AppendString(b, a.Invocation)
	b = append(b, `,"intent":`...)
	b = jsonenc.AppendString(b, a.Intent)
	b = append(b, `,"handle_fp":`...)
	b = jsonenc.AppendString(b, a.HandleFP)
	b = append(b, `,"mode":`...)
	b = jsonenc.AppendString(b, a.Mode)
	b = append(b, `,"method":`...)
	b = jsonenc.AppendString(b, a.Method)
	b = append(b, `,"host":`...)
	b = jsonenc.AppendString(b, a.Host)
	b = append(b, `,"port":`...)
	b = strconv.AppendInt(b, int64(a.Port), 10)
	b = append(b, `,"path":`...)
	b = jsonenc.AppendString(b, a.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(a.Status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, a.BytesOut, 10)
	b = append(b, `,"upstream_ms":`...)
	b = jsonenc.AppendFloat(b, a.UpstreamMS)
	b = append(b, `,"total_ms":`...)
	b = jsonenc.AppendFloat(b, a.totalMS())
	b = append(b, `,"secret_version":`...)
	b = strconv.AppendInt(b, int64(a.Version), 10)
	b = append(b, `,"decision":`...)
	b = jsonenc.AppendString(b, a.decision())
	b = append(b, `,"code":`...)
	b = jsonenc.AppendString(b, a.Code)
	b = append(b, `,"reason":`...)
	b = jsonenc.AppendString(b, a.Reason)
	b = append(b, `,"echo_redactions":`...)
	b = strconv.AppendInt(b, int64(a.Redactions), 10)
	b = append(b, `,"retried":`...)
	b = strconv.AppendBool(b, a.Retried)
	b = append(b, `,"processor":`...)
	b = jsonenc.AppendString(b, a.Processor)
	b = append(b, `,"token_cache":`...)
	b = jsonenc.AppendString(b, a.TokenCache)
	b = append(b, `,"lease_fp":`...)
	b = jsonenc.AppendString(b, a.Lease)
	b = append(b, `,"addr_class":`...)
	b = jsonenc.AppendString(b, a.AddrClass.String())
	b = a.appendTraceID(b)
	return append(b, "}\n"...)
}

func (a *auditRecord) totalMS() float64 { return float64(a.total.Microseconds()) / 1000 }

func (a *auditRecord) decision() string {
	if a.Code != "" {
		return "deny"
	}
	return "allow"
}

// refuseUnaudited answers r with 503 audit_unavailable: the audit output
// is stalled and lines are being lost, so nothing is sent upstream until
// it recovers. The refusal is counted in the request metrics, not audited:
// its line could only add to the backlog that caused it.
func (s *Server) refuseUnaudited(w http.ResponseWriter, r *http.Request) {
	d := deny(CodeAuditUnavailable, "the proxy cannot write its audit log; no request is sent until it can")
	s.metrics.done(&auditRecord{Code: d.code, Status: codeStatus[d.code]})
	d.write(w, r)
}
