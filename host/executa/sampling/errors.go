package sampling

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Why a sampling backend failed (Error.Kind). Each reaches the plugin as
// its own errorCode (in error.data) and is logged once for the operator.
const (
	KindUnauthorized = "PROVIDER_UNAUTHORIZED" // the backend refused the key (401/403)
	KindRateLimited  = "PROVIDER_RATE_LIMITED" // 429; retryAfter when the backend said
	KindUpstream     = "PROVIDER_ERROR"        // 5xx or another unexpected status
	KindBadResponse  = "PROVIDER_BAD_RESPONSE" // the answer is not a chat completion
	KindUnavailable  = "PROVIDER_UNAVAILABLE"  // the key could not be had (Vault down) or the proxy refused
)

// Error is a sampling backend's failure, with what the plugin may learn:
// the kind, the status, when to retry. It never holds the key or the
// backend's body.
type Error struct {
	Kind       string
	Status     int           // the backend's HTTP status, when it answered
	RetryAfter time.Duration // from Retry-After, when given
	Err        error         // the cause, for the operator's log
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("sampling backend: %s (HTTP %d)", e.Kind, e.Status)
	}
	if e.Err != nil {
		return fmt.Sprintf("sampling backend: %s: %v", e.Kind, e.Err)
	}
	return "sampling backend: " + e.Kind
}

func (e *Error) Unwrap() error { return e.Err }

// statusError classifies a backend's non-200 answer. The egress proxy's
// own refusals (X-Airlock-Error) mean the credential or the route is not
// available, not that the backend failed.
func statusError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	switch {
	case resp.Header.Get("X-Airlock-Error") != "":
		e.Kind = KindUnavailable
		e.Err = errors.New("the egress proxy refused: " + resp.Header.Get("X-Airlock-Error"))
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.Kind = KindUnauthorized
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Kind = KindRateLimited
	default:
		e.Kind = KindUpstream
	}
	e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// retryAfter reads delta-seconds or an HTTP date; zero when absent or
// unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}
