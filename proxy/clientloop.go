package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// The proxy's side of the HTTP/1.1 loop's seams (conn.go, listener.go):
// the loop runs the Server as its http.Handler, logs to the Server's
// log, and hands back what it refuses before any handler sees it, which
// the proxy audits and answers here with its own denial codes.

// connServer is the HTTP/1.1 loop for one listener; plugin names the
// plugin whose own listener it serves (ServeSandbox), "" for the shared
// one.
func (s *Server) connServer(plugin string) *connServer {
	cs := &connServer{handler: s, log: s.log, refuse: s.refuseRead,
		readHeaderTimeout: s.cfg.Limits.ReadHeaderTimeout, idleTimeout: s.cfg.Limits.IdleTimeout,
		headerLimit: int64(s.cfg.Limits.MaxHeaderBytes)}
	if plugin != "" {
		cs.connContext = func(ctx context.Context) context.Context { return withConnPlugin(ctx, plugin) }
	}
	return cs
}

// refuseDenials names each of the loop's refusals with the proxy's code
// and detail; status, when not 0, is answered in place of the code's.
var refuseDenials = [...]struct {
	code, detail string
	status       int
}{
	refuseBadRequest:    {CodeBadRequest, "the proxy could not parse the request (HTTP/1.1, one Host header, no Transfer-Encoding with Content-Length)", 0},
	refuseHeadTooLarge:  {CodeHeadersTooLarge, "the request headers are larger than the proxy allows", 0},
	refuseInvalidHeader: {CodeInvalidHeader, "a header holds a control character", 0},
	refuseExpectation:   {CodeBadRequest, "only the 100-continue expectation is supported", http.StatusExpectationFailed},
}

// refuseRead audits and answers what the loop refused on the connection
// whose context is ctx.
func (s *Server) refuseRead(ctx context.Context, r refusal) *http.Response {
	rd := refuseDenials[r.code]
	a := &auditRecord{start: time.Now(), Plugin: connPlugin(ctx), Mode: modePlain}
	if ctx.Value(tunnelKey{}) != nil {
		a.Mode = modeIntercept
	}
	if r.req != nil {
		a.Method, a.Host = r.req.Method, r.req.URL.Hostname()
	}
	return s.refuseWith(a, deny(rd.code, rd.detail).withReason(r.reason), rd.status)
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
