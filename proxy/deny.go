package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/airlock-dev/airlock/broker"
)

// Error codes, sent in X-Airlock-Error and the JSON body's "error".
const (
	CodeConnectNotAllowed    = "connect_not_allowed"           // 405
	CodeAbsoluteFormRequired = "absolute_form_required"        // 400
	CodeBadRequest           = "bad_request"                   // 400
	CodeSchemeNotAllowed     = "scheme_not_allowed"            // 400
	CodeUserinfo             = "userinfo_not_allowed"          // 400
	CodeHostMismatch         = "host_mismatch"                 // 400
	CodePathNotAllowed       = "path_not_allowed"              // 400
	CodeInvalidHeader        = "invalid_header_value"          // 400
	CodePlaceholderMissing   = "placeholder_missing"           // 400
	CodeHandleMissing        = "handle_missing"                // 407
	CodeHandleInvalid        = "handle_invalid"                // 403
	CodeDestination          = "destination_not_declared"      // 403
	CodeMethodForIntent      = "method_not_allowed_for_intent" // 403
	CodeMethodNotDeclared    = "method_not_declared"           // 403
	CodeAddressNotAllowed    = "address_not_allowed"           // 403
	CodeBodyTooLarge         = "request_body_too_large"        // 413
	CodeRateLimited          = "rate_limited"                  // 429
	CodeTooManyConcurrent    = "too_many_concurrent_requests"  // 429
	CodeSecretUnavailable    = "secret_unavailable"            // 503
	CodeLeaseUnavailable     = "lease_unavailable"             // 503: the invocation's lease could not be obtained
	CodeSecretInvalid        = "secret_invalid"                // 502
	CodeUpstreamTLS          = "upstream_tls_failed"           // 502
	CodeUpstreamUnreachable  = "upstream_unreachable"          // 502
	CodeUpstreamTimeout      = "upstream_timeout"              // 504
	CodeUnscannable          = "response_encoding_unsupported" // 502
	CodeStoreUnavailable     = "handle_store_unavailable"      // 503
	CodeHeadersTooLarge      = "request_headers_too_large"     // 431
	CodeLimitsUnavailable    = "limits_unavailable"            // 503
	CodeUpgradeNotSupported  = "upgrade_not_supported"         // 501
	CodePassNotAHandle       = "pass_not_a_handle"             // 403
	CodeSigningFailed        = "signing_failed"                // 502
	CodeTokenEndpoint        = "token_endpoint_unreachable"    // 502
	CodeTokenExchange        = "token_exchange_failed"         // 502
	CodeClockSkew            = "clock_skew"                    // 503
	CodeHandleInRequest      = "handle_in_request"             // 403
	CodeSelfDial             = "proxy_self_dial"               // 403
	CodePresigned            = "presigned_url_not_supported"   // 400
	CodeInjectUnsupported    = "inject_kind_unsupported"       // 502: the intent's kind has no injector here
	CodeClientClosed         = "client_closed_request"         // 499, never sent: the client is gone
	CodeAuditUnavailable     = "audit_unavailable"             // 503
	CodeHandleNotThisPlugins = "handle_not_this_plugins"       // 403: another plugin's handle or pass on a plugin's own listener
	CodeInvalidPseudoHeader  = "invalid_pseudo_header"         // 400: an HTTP/2 :method, :path or :authority HTTP/1.1 could not carry
	CodeResidency            = "residency_violation"           // 403: the destination's region is outside the handle's residency
	CodeGrantRevoked         = "grant_revoked"                 // 403: the handle's access grant was revoked or lapsed
	CodeBudgetExhausted      = "budget_exhausted"              // 429: a budget line has no egress requests or bytes left
	CodeBudgetUnavailable    = "budget_unavailable"            // 503: the ledger cannot charge a handle with budget lines
)

var codeStatus = map[string]int{
	CodeConnectNotAllowed: http.StatusMethodNotAllowed, CodeAbsoluteFormRequired: http.StatusBadRequest,
	CodeBadRequest: http.StatusBadRequest, CodeSchemeNotAllowed: http.StatusBadRequest, CodeUserinfo: http.StatusBadRequest,
	CodeHostMismatch: http.StatusBadRequest, CodePathNotAllowed: http.StatusBadRequest, CodeInvalidHeader: http.StatusBadRequest,
	CodePlaceholderMissing: http.StatusBadRequest, CodeHandleMissing: http.StatusProxyAuthRequired,
	CodeHandleInvalid: http.StatusForbidden, CodeDestination: http.StatusForbidden, CodeMethodForIntent: http.StatusForbidden,
	CodeMethodNotDeclared: http.StatusForbidden, CodeAddressNotAllowed: http.StatusForbidden,
	CodeBodyTooLarge: http.StatusRequestEntityTooLarge, CodeRateLimited: http.StatusTooManyRequests,
	CodeTooManyConcurrent: http.StatusTooManyRequests, CodeSecretUnavailable: http.StatusServiceUnavailable,
	CodeSecretInvalid: http.StatusBadGateway, CodeUpstreamTLS: http.StatusBadGateway,
	CodeUpstreamUnreachable: http.StatusBadGateway, CodeUpstreamTimeout: http.StatusGatewayTimeout,
	CodeUnscannable: http.StatusBadGateway, CodeStoreUnavailable: http.StatusServiceUnavailable,
	CodeHeadersTooLarge: http.StatusRequestHeaderFieldsTooLarge, CodeLimitsUnavailable: http.StatusServiceUnavailable,
	CodeUpgradeNotSupported: http.StatusNotImplemented, CodePassNotAHandle: http.StatusForbidden,
	CodeSigningFailed: http.StatusBadGateway, CodeTokenEndpoint: http.StatusBadGateway, CodeTokenExchange: http.StatusBadGateway,
	CodeClockSkew: http.StatusServiceUnavailable, CodeHandleInRequest: http.StatusForbidden, CodeSelfDial: http.StatusForbidden,
	CodePresigned: http.StatusBadRequest, CodeInjectUnsupported: http.StatusBadGateway,
	CodeLeaseUnavailable: http.StatusServiceUnavailable, CodeAuditUnavailable: http.StatusServiceUnavailable,
	CodeClientClosed: statusClientClosed, CodeHandleNotThisPlugins: http.StatusForbidden,
	CodeInvalidPseudoHeader: http.StatusBadRequest, CodeResidency: http.StatusForbidden, CodeGrantRevoked: http.StatusForbidden,
	CodeBudgetExhausted: http.StatusTooManyRequests, CodeBudgetUnavailable: http.StatusServiceUnavailable,
}

// statusClientClosed is what the audit records for a request whose
// client hung up before the upstream answered (nginx's 499).
const statusClientClosed = 499

// HeaderError carries the denial code on every proxy-made response.
const HeaderError = "X-Airlock-Error"

// denial is a refusal: a code, a detail safe to show the plugin, and an
// audit reason that may say more (never a secret or handle).
type denial struct {
	code   string
	detail string
	reason string // for the audit line; defaults to detail
	// declared: the refused handle's own destinations (its plugin's
	// manifest's, or the intent binding's it was issued with), which the
	// answer's body lists so the plugin sees what it may reach. Never
	// another plugin's, and not in the audit line.
	declared []broker.Destination
	// budget and dimension name what a budget_exhausted refusal ran out
	// of: a budget key ("run:…", never a secret) and a dimension.
	budget, dimension string
}

func deny(code, detail string) *denial { return &denial{code: code, detail: detail} }

func (d *denial) withReason(r string) *denial { d.reason = r; return d }

func (d *denial) withDeclared(ds []broker.Destination) *denial { d.declared = ds; return d }

func (d *denial) auditReason() string {
	if d.reason != "" {
		return d.reason
	}
	return d.detail
}

// response builds the proxy's answer for d to req.
func (d *denial) response(req *http.Request) *http.Response {
	if isGRPC(req) {
		return d.grpcResponse(req)
	}
	status := codeStatus[d.code]
	if status == 0 {
		status = http.StatusForbidden
	}
	body, _ := json.Marshal(struct {
		Error     string               `json:"error"`
		Detail    string               `json:"detail"`
		Declared  []broker.Destination `json:"declared,omitempty"`
		Budget    string               `json:"budget,omitempty"`
		Dimension string               `json:"dimension,omitempty"`
	}{d.code, d.detail, d.declared, d.budget, d.dimension})
	body = append(body, '\n')
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderError, d.code)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if status == http.StatusProxyAuthRequired {
		h.Set("Proxy-Authenticate", `Bearer realm="airlock", Basic realm="airlock"`)
	}
	if status == http.StatusTooManyRequests && d.code != CodeBudgetExhausted {
		// A rate refills; a spent budget does not.
		h.Set("Retry-After", "1")
	}
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// write sends d as the response on w.
func (d *denial) write(w http.ResponseWriter, req *http.Request) {
	resp := d.response(req)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
