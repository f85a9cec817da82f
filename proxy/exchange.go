package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// exchange is one allowed request's trip upstream: send wraps the
// response body in the echo guard before relay copies it (and
// Content-Length survives, since redaction keeps lengths).
type exchange struct {
	s      *Server
	grant  *broker.Grant
	intent broker.Intent
	inj    injector   // the intent's kind, resolved with the intent
	pol    kindPolicy // inj's policy for the intent's settings
	handle string
	secret broker.Secret
	forms  *echoForms
	audit  *auditRecord
	slot   slot // the plugin's concurrency slot, given back by release

	canRetry bool
	// tokenRetry: a token processor's request, replayed once with a
	// fresh access token after a 401; token is the access token sent.
	tokenRetry bool
	token      string
	// replay is the request body when the proxy holds it whole (kept
	// for a replay, or read to be signed).
	replay []byte
	// bodyHandle: the upload was cut at a handle (bodyscan.go).
	bodyHandle atomic.Bool
	// placeholders holds the placeholder headers' values before
	// substitution, for a retry (the other injections are idempotent).
	placeholders http.Header
	// ctx is the request's context, for why a stream ended (h2.go).
	ctx context.Context
	// sent: the request went to the upstream (send ran); bodyBytes is
	// how much of its body did, for a handle with budget lines.
	sent      bool
	bodyBytes atomic.Int64
}

// send sends the request and always answers with a response: a
// transport failure becomes a denial.
func (x *exchange) send(req *http.Request) *http.Response {
	t0 := time.Now()
	req = x.audit.tr.withDialTrace(req)
	x.ctx, x.sent = req.Context(), true
	resp, class, err := x.s.roundTrip(req, x.credential())
	x.judgeToken(resp, err)
	if err == nil && (x.canRetry || x.tokenRetry) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		if retried, rclass, rerr, ok := x.retry(req, resp); ok {
			resp, class, err = retried, rclass, rerr
			x.judgeToken(resp, err)
		}
	}
	x.audit.UpstreamMS = float64(time.Since(t0).Microseconds()) / 1000
	x.audit.tr.done(spanExchange, t0, err)
	x.audit.AddrClass = class
	if err != nil {
		d := upstreamDenial(err)
		if cut := x.bodyHandleCut(); cut != nil {
			d = cut
		} else if errors.Is(context.Cause(req.Context()), h1.ErrClientGone) {
			d = deny(CodeClientClosed, "the client closed the connection before the upstream answered")
		} else if credentialGone(req.Context()) {
			d = deny(CodeHandleInvalid, "the credential handle was revoked or expired during the call")
		}
		x.done(d)
		return d.response(req)
	}
	stripHopByHop(resp.Header)
	if x.s.echo {
		if d := unscannableEncoding(resp.Header); d != nil {
			resp.Body.Close()
			x.done(d)
			return d.response(req)
		}
		x.audit.Redactions += redactHeaders(resp.Header, x.forms)
		// The announced trailers' names, which relay sends in the
		// head; their values are redacted when they arrive (Close).
		x.audit.Redactions += redactHeaders(resp.Trailer, x.forms)
		src, forms := io.Reader(resp.Body), x.forms
		if isGRPCResponse(req, resp) {
			// Message by message (grpcguard.go).
			src, forms = newGRPCGuard(req.Context(), resp.Body, x.forms, &x.audit.Redactions, x.audit.tr), nil
		}
		b := &guardedBody{x: x, closer: resp.Body, resp: resp, stream: resp.ContentLength < 0}
		b.rd.init(src, forms)
		resp.Body = b
	} else {
		b := &guardedBody{x: x, closer: resp.Body, stream: resp.ContentLength < 0}
		b.rd.init(resp.Body, nil)
		resp.Body = b
	}
	x.audit.Status = resp.StatusCode
	return resp
}

// judgeToken tells the token cache what the upstream made of the access
// token sent: a 401 drops it, whether or not the request can be
// replayed (a large or streamed upload cannot), so the next request
// gets a fresh one; any other answer ends a refresh backoff.
func (x *exchange) judgeToken(resp *http.Response, err error) {
	if err != nil || x.token == "" {
		return
	}
	if resp.StatusCode == http.StatusUnauthorized {
		x.s.tokens.drop(x.grant.Intent, x.token)
	} else {
		x.s.tokens.accepted(x.grant.Intent, x.token)
	}
}

// retry handles an upstream 401/403: if Vault now holds a newer version of
// the secret, the request is sent once more with it; a token processor's
// request refused with 401 is sent once more with a fresh access token.
// A retry that cannot be prepared keeps the first answer.
func (x *exchange) retry(req *http.Request, resp *http.Response) (*http.Response, addrClass, error, bool) {
	ts := x.audit.tr.now()
	fresh, err := x.s.broker.Secret(req.Context(), x.grant, true)
	x.audit.tr.done(spanSecret, ts, err)
	rotated := err == nil && (fresh.Version != x.secret.Version || fresh.Value != x.secret.Value)
	tokenRefused := x.tokenRetry && resp.StatusCode == http.StatusUnauthorized
	if !(rotated && x.canRetry || tokenRefused) {
		return nil, addrUnknown, nil, false
	}
	if !rotated {
		fresh = x.secret
	}
	refused := x.token
	next := req.Clone(req.Context())
	for k, v := range x.placeholders {
		next.Header[k] = v
	}
	forms, d := x.inj.inject(next, x.intent.Inject.Kind, fresh, x.handle)
	if d != nil {
		return nil, addrUnknown, nil, false
	}
	if x.replay != nil {
		next.Body = io.NopCloser(bytes.NewReader(x.replay))
		next.ContentLength = int64(len(x.replay))
		next.GetBody = req.GetBody
	}
	prev := x.forms
	x.secret, x.forms = fresh, forms
	if x.pol.processor {
		if d := x.inj.process(next, x); d != nil || !rotated && refused != "" && x.token == refused {
			// No new token (the refresh is backing off): the first
			// answer stands.
			x.forms = newEchoForms(slices.Concat(x.forms.strs, prev.strs))
			return nil, addrUnknown, nil, false
		}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // draining for reuse
	resp.Body.Close()
	r2, class, err := x.s.roundTrip(next, x.credential())
	x.forms = newEchoForms(slices.Concat(x.forms.strs, prev.strs)) // guard against both versions
	x.audit.Version, x.audit.Retried = fresh.Version, true
	return r2, class, err, true
}

// release gives the request's concurrency slot back (once).
func (x *exchange) release() { x.slot.release() }

func (x *exchange) done(d *denial) {
	x.release()
	if x.sent {
		x.s.chargeBytes(x.grant, x.bodyBytes.Load()+x.audit.BytesOut)
	}
	x.s.finish(x.audit, d)
}

// guardedBody counts and redacts the body, and finishes the audit record
// when relay closes it. With the echo guard on, resp is set: its
// trailers, which arrive with the end of the body and which relay
// forwards after closing it, are redacted on Close.
type guardedBody struct {
	x      *exchange
	rd     redactor
	closer io.Closer
	resp   *http.Response
	stream bool // the upstream sent no Content-Length
	once   sync.Once
}

func (b *guardedBody) Read(p []byte) (int, error) { return b.rd.Read(p) }

// WriteTo lets io.Copy stream the body without a per-response buffer.
// A body without a length (a stream: SSE, chunked) gets its head sent at
// once, before the first byte of body arrives, and every chunk flushed.
func (b *guardedBody) WriteTo(w io.Writer) (int64, error) {
	if !b.stream {
		// A body of known length is sent as buffers fill, its end
		// with the response's final flush, after Close has written the
		// audit line.
		return b.rd.copyTo(w, nil)
	}
	f, _ := w.(http.Flusher)
	if f != nil {
		f.Flush()
	}
	return b.rd.copyTo(w, f)
}

func (b *guardedBody) Close() error {
	err := b.closer.Close()
	b.once.Do(func() {
		if b.resp != nil {
			b.x.audit.Redactions += redactHeaders(b.resp.Trailer, b.x.forms)
		}
		b.rd.release()
		b.x.audit.BytesOut = b.rd.nbytes
		b.x.audit.Redactions += b.rd.hits
		b.x.done(b.x.cutShort())
	})
	return err
}

// upstreamDenial maps a transport error to the answer the plugin gets.
func upstreamDenial(err error) *denial {
	var na *errAddressNotAllowed
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	var dnsErr *net.DNSError
	var netErr net.Error
	var bodyErr *h1.RequestBodyError
	var tooLarge *http.MaxBytesError
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		// It quotes the whole URL, which may hold the injected secret
		// (kind query); the reason keeps only what failed.
		err = ue.Err
	}
	switch {
	case errors.As(err, &bodyErr), errors.As(err, &tooLarge):
		// Reading the client's body failed while it was sent on.
		return bodyDenial(err)
	case errors.As(err, &na) && na.class == addrDenySelf:
		return deny(CodeSelfDial, "the destination is the proxy itself (an address of this machine on one of the proxy's ports)").withReason(na.reason)
	case errors.As(err, &na):
		return deny(CodeAddressNotAllowed, "the destination resolves to an address the proxy may not dial").withReason(na.reason)
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &recordErr),
		strings.Contains(err.Error(), "tls:"):
		return deny(CodeUpstreamTLS, "the upstream's TLS could not be verified").withReason(err.Error())
	case errors.As(err, &dnsErr):
		return deny(CodeUpstreamUnreachable, "the upstream host could not be resolved").withReason("DNS lookup failed")
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return deny(CodeUpstreamTimeout, "the upstream did not answer in time").withReason(err.Error())
	}
	return deny(CodeUpstreamUnreachable, "the upstream could not be reached").withReason(err.Error())
}
