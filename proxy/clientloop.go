package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// The proxy's side of the HTTP/1.1 loop's seams (package h1): the loop
// runs the Server as its http.Handler, logs to the Server's log, and
// hands back what it refuses before any handler sees it, which the proxy
// audits and answers here with its own denial codes.

// loop is the HTTP/1.1 loop for one listener; plugin names the plugin
// whose own listener it serves (ServeSandbox), "" for the shared one.
func (s *Server) loop(plugin string) *h1.Server {
	l := &h1.Server{Handler: s, Log: s.log, Refuse: s.refuseRead,
		ReadHeaderTimeout: s.cfg.Limits.ReadHeaderTimeout, IdleTimeout: s.cfg.Limits.IdleTimeout,
		HeaderLimit: int64(s.cfg.Limits.MaxHeaderBytes)}
	if plugin != "" {
		l.ConnContext = func(ctx context.Context) context.Context { return withConnPlugin(ctx, plugin) }
	}
	return l
}

// refuseDenials names each of the loop's refusals with the proxy's code
// and detail; status, when not 0, is answered in place of the code's.
var refuseDenials = [...]struct {
	code, detail string
	status       int
}{
	h1.RefuseBadRequest:    {CodeBadRequest, "the proxy could not parse the request (HTTP/1.1, one Host header, no Transfer-Encoding with Content-Length)", 0},
	h1.RefuseHeadTooLarge:  {CodeHeadersTooLarge, "the request headers are larger than the proxy allows", 0},
	h1.RefuseInvalidHeader: {CodeInvalidHeader, "a header holds a control character", 0},
	h1.RefuseExpectation:   {CodeBadRequest, "only the 100-continue expectation is supported", http.StatusExpectationFailed},
}

// refuseRead audits and answers what the loop refused on the connection
// whose context is ctx.
func (s *Server) refuseRead(ctx context.Context, r h1.Refusal) *http.Response {
	rd := refuseDenials[r.Code]
	a := &auditRecord{start: time.Now(), Plugin: connPlugin(ctx), Mode: modePlain}
	if ctx.Value(tunnelKey{}) != nil {
		a.Mode = modeIntercept
	}
	if r.Req != nil {
		a.Method, a.Host = r.Req.Method, r.Req.URL.Hostname()
	}
	return s.refuseWith(a, deny(rd.code, rd.detail).withReason(r.Reason), rd.status)
}

// refuseWith finishes a's line with d and returns d's answer, with
// status in place of d's when it is not 0.
func (s *Server) refuseWith(a *auditRecord, d *denial, status int) *http.Response {
	a.Status = status
	s.finish(a, d)
	resp := d.response(nil)
	if status != 0 {
		resp.StatusCode, resp.Status = status, strconv.Itoa(status)+" "+http.StatusText(status)
	}
	return resp
}

// bodyDenial is the answer for a request body that could not be read.
func bodyDenial(err error) *denial {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return deny(CodeBodyTooLarge, "the request body is larger than the proxy allows")
	}
	return deny(CodeBadRequest, "the request body is malformed or was cut short").withReason(err.Error())
}
