package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// auditRecord is one proxied request's audit line. It never holds a
// secret, a handle or a query value.
type auditRecord struct {
	start      time.Time
	total      time.Duration
	Plugin     string
	Invocation string
	Intent     string
	HandleFP   string
	Method     string
	Host       string
	Port       int    // the destination port (0 when the request was refused before it was known)
	Mode       string // modePlain, modeConnect or modeIntercept
	Path       string // path plus query keys, values dropped
	Status     int
	BytesOut   int64
	UpstreamMS float64
	Version    int
	Decision   string
	Code       string
	Reason     string
	Redactions int
	Retried    bool
	// Processor names a processor inject kind (hmac, aws_sigv4,
	// oauth2_*); TokenCache says whether a token processor's access
	// token came from the cache (hit) or a fetch (miss).
	Processor  string
	TokenCache string
	// AddrClass is what the address policy made of the upstream
	// address the request went to, or of the one it refused.
	AddrClass addrClass
	// Lease is the fingerprint of the invocation's lease the secret came
	// with (source vault_lease); empty for a static secret.
	Lease string
	// tr is what the request's spans are made from, and names its trace
	// (trace_id), when tracing is on (trace.go); a pointer, so that a
	// record is no larger with tracing off.
	tr *reqTrace

	// grant is the live grant of the handle the request presented (or
	// another plugin's, presented by presentedBy): a refusal that is a
	// violation is recorded against it (enforce.go).
	grant       *broker.Grant
	presentedBy string
}

// The modes an audit line names.
const (
	modePlain     = "plain"     // an absolute-form request (HTTP_PROXY)
	modeConnect   = "connect"   // a CONNECT that opens an intercepted tunnel
	modeIntercept = "intercept" // a request inside an intercepted tunnel
)

// tunnelKey marks the context of the requests read inside a tunnel.
type tunnelKey struct{}

// requestMode is the mode of r: inside a tunnel, a CONNECT, or plain.
func requestMode(r *http.Request) string {
	switch {
	case r.Context().Value(tunnelKey{}) != nil:
		return modeIntercept
	case r.Method == http.MethodConnect:
		return modeConnect
	}
	return modePlain
}

// pathForAudit keeps the path and the names of query parameters; a path
// or name that holds a handle is withheld (the request is refused with
// handle_in_request, and the audit line must not carry the handle).
func pathForAudit(u *url.URL) string {
	p := pathAndKeys(u)
	if containsHandleFold(p) || strings.Contains(p, "%") && containsHandleFold(unescapeAll(p)) {
		return "(withheld: holds a handle)"
	}
	return p
}

func pathAndKeys(u *url.URL) string {
	p := u.EscapedPath()
	if len(p) > 512 {
		p = p[:512] + "…"
	}
	if u.RawQuery == "" {
		return p
	}
	keys := []string{}
	for _, part := range strings.Split(u.RawQuery, "&") {
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk != "" && len(keys) < 32 {
			keys = append(keys, url.QueryEscape(uk))
		}
	}
	sort.Strings(keys)
	return p + "?" + strings.Join(keys, "&")
}

// traceAttr is the trace_id attribute, or the empty one (which handlers
// leave out) when tracing is off.
func (a *auditRecord) traceAttr() slog.Attr {
	if id := a.traceID(); id != "" {
		return slog.String("trace_id", id)
	}
	return slog.Attr{}
}

func (a *auditRecord) log(l *slog.Logger) {
	if l == nil {
		return
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, "egress",
		slog.String("plugin", a.Plugin), slog.String("invocation", a.Invocation), slog.String("intent", a.Intent),
		slog.String("handle_fp", a.HandleFP), slog.String("mode", a.Mode), slog.String("method", a.Method),
		slog.String("host", a.Host), slog.Int("port", a.Port),
		slog.String("path", a.Path), slog.Int("status", a.Status), slog.Int64("bytes", a.BytesOut),
		slog.Float64("upstream_ms", a.UpstreamMS), slog.Float64("total_ms", a.totalMS()),
		slog.Int("secret_version", a.Version), slog.String("decision", a.decision()), slog.String("code", a.Code),
		slog.String("reason", a.Reason), slog.Int("echo_redactions", a.Redactions), slog.Bool("retried", a.Retried),
		slog.String("processor", a.Processor), slog.String("token_cache", a.TokenCache),
		slog.String("lease_fp", a.Lease), slog.String("addr_class", a.AddrClass.String()), a.traceAttr(),
	)
}
