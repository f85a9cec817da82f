package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/internal/serve"
	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// HTTP/2 inside an intercepted CONNECT tunnel. The tunnel's TLS offers
// "h2" and "http/1.1" by ALPN; a client that picks h2 (every gRPC
// client) is served by net/http's HTTP/2 server (golang.org/x/net/http2,
// bundled), and each stream is one
// request that goes through the same handler as an HTTP/1.1 request in
// the tunnel: adopted into the absolute-form request it stands for, then
// attributed, checked, limited, injected, guarded and audited by
// ServeHTTP. A stream holds its per-plugin concurrency slot until it
// ends, and its handle (and the CONNECT's credential) are resolved again
// while it lasts (revokewatch.go).
//
// Upstream, a request that came as HTTP/2 goes out on a transport that
// offers h2 and http/1.1 by ALPN and speaks what the upstream picks
// (gRPC needs h2), one transport per plugin and credential (h2pool.go);
// HTTP/1.1 requests keep the proxy's own HTTP/1.1 pool.

// h2Conn is the HTTP/2 side of one tunnel: it keeps the CONNECT's
// connection marked busy while a stream is open, so that a shutdown
// closes an idle HTTP/2 tunnel at once and lets a busy one finish.
type h2Conn struct {
	s      *Server
	t      *tunnel
	tc     *tls.Conn
	c      *h1.Conn
	active atomic.Int32
}

// serveH2 serves the HTTP/2 connection on tc until it closes.
func (s *Server) serveH2(c *h1.Conn, t *tunnel, tc *tls.Conn) {
	hc := &h2Conn{s: s, t: t, tc: tc, c: c}
	if !c.SetIdle() {
		return
	}
	readHeaderTimeout, idleTimeout := c.Timeouts()
	maxStreams := s.cfg.Limits.PerPluginConcurrency
	if maxStreams <= 0 {
		maxStreams = 100
	}
	l := &oneConnListener{c: tc, closed: make(chan struct{})}
	// closed: the connection is done (Serve returns earlier on Shutdown).
	closed := make(chan struct{})
	var connDone sync.Once
	srv := &http.Server{
		Handler:           http.HandlerFunc(hc.serveStream),
		IdleTimeout:       idleTimeout,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    s.cfg.Limits.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return context.WithValue(c.Context(), tunnelKey{}, t) },
		ErrorLog:          log.New(io.Discard, "", 0),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: maxStreams, MaxReceiveBufferPerStream: 1 << 20},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				l.Close()
				connDone.Do(func() { close(closed) })
			}
		},
	}
	// The connection context ends when a shutdown's grace is over.
	stop := context.AfterFunc(c.Context(), func() { _ = tc.Close() })
	defer stop()
	// Once the CONNECT's credential is gone the tunnel takes no new
	// stream (GOAWAY); its open streams end on their own watch with a
	// status that says why.
	wctx, unwatch := s.watchCredentials(c.Context(), t.cred)
	defer unwatch()
	goaway := make(chan struct{})
	stopGoAway := context.AfterFunc(wctx, func() {
		defer close(goaway)
		if credentialGone(wctx) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(wctx), serve.ShutdownGrace)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}
	})
	defer func() {
		if !stopGoAway() {
			<-goaway
		}
	}()
	_ = srv.Serve(l)
	<-closed
}

// oneConnListener hands net/http's server (whose HTTP/2 is
// golang.org/x/net/http2, bundled) the one connection a tunnel holds,
// already TLS-terminated with h2 negotiated; it then blocks until the
// connection is done.
type oneConnListener struct {
	c      net.Conn
	taken  bool
	mu     sync.Mutex
	once   sync.Once
	closed chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.taken {
		l.taken = true
		l.mu.Unlock()
		return l.c, nil
	}
	l.mu.Unlock()
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// serveStream serves one HTTP/2 stream.
func (hc *h2Conn) serveStream(w http.ResponseWriter, r *http.Request) {
	hc.active.Add(1)
	hc.c.SetBusy()
	defer func() {
		if hc.active.Add(-1) == 0 && !hc.c.SetIdle() {
			_ = hc.tc.Close()
		}
	}()
	s := hc.s
	d := checkH2Request(r) // before anything else reads the request
	if d == nil {
		d = hc.t.adopt(r)
	}
	if d != nil {
		s.answer(w, r, &auditRecord{start: time.Now(), Plugin: connPlugin(hc.c.Context()), Method: r.Method, Host: hc.t.host, Port: hc.t.port, Mode: modeIntercept}, d)
		return
	}
	handle, _ := extractHandle(r)
	ctx, stop := s.watchCredentials(r.Context(), handle, hc.t.cred)
	defer stop()
	ctx, cut := withGRPCCut(ctx)
	s.ServeHTTP(w, r.WithContext(ctx))
	if !isGRPC(r) || w.Header().Get(headerGRPCStatus) != "" {
		// Not gRPC, or its status was sent (a refusal before anything
		// went upstream is a trailers-only answer exchange wrote).
		return
	}
	// A call cut while it ran ends with a status that says why.
	if credentialGone(ctx) {
		setGRPCTrailers(w, deny(CodeHandleInvalid, "the credential handle was revoked or expired during the call"))
	} else if cut.d != nil {
		setGRPCTrailers(w, cut.d)
	}
}

// cutShort is why a streamed response ended before the upstream ended
// it (its credential went, the gRPC guard stopped it), for the audit
// line; nil when it ran its course.
func (x *exchange) cutShort() *denial {
	if x.ctx == nil {
		return nil
	}
	if credentialGone(x.ctx) {
		return deny(CodeHandleInvalid, "the credential handle was revoked or expired during the call")
	}
	if d := x.bodyHandleCut(); d != nil {
		return d
	}
	if c, _ := x.ctx.Value(grpcCutKey{}).(*grpcCut); c != nil {
		return c.d
	}
	return nil
}

// roundTrip sends req upstream for the credential cred: on an
// HTTP/2-capable transport of that credential's when it came as HTTP/2
// (h2pool.go), on the HTTP/1.1 pool otherwise.
//
// It also returns the class of the address the request went to (or the
// refused one's), for the audit line.
func (s *Server) roundTrip(req *http.Request, cred credKey) (*http.Response, addrClass, error) {
	if req.ProtoMajor != 2 {
		return s.up.roundTrip(req, cred)
	}
	if isGRPC(req) {
		// gRPC servers may insist on it; it was stripped as hop-by-hop.
		req.Header.Set("Te", "trailers")
		if s.echo {
			// The guard cannot scan compressed messages (grpcguard.go).
			req.Header.Set("Grpc-Accept-Encoding", "identity")
		}
	}
	if strings.HasPrefix(req.URL.Opaque, "//") {
		// A path that starts with "//" (prepare puts the client's path in
		// Opaque) would read as a network path to net/url and the
		// transport would refuse it; with the authority in front the
		// HTTP/2 transport sends :path as the client sent it (and its
		// HTTP/1.1 fallback the absolute form of the same target).
		req.URL.Opaque = "//" + req.URL.Host + req.URL.Opaque
	}
	// The HTTP/2 transport pools its connections out of sight: the
	// connection a stream took is classified when the stream gets it.
	var class addrClass
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { class = classOf(info.Conn) }}))
	resp, err := s.h2.transport(cred).RoundTrip(req)
	if err != nil {
		if class == addrUnknown {
			class = refusedClass(err)
		}
		return nil, class, err
	}
	return resp, class, nil
}

// refusedClass is the class of the address a dial refused, if that is
// why err happened.
func refusedClass(err error) addrClass {
	var na *errAddressNotAllowed
	if errors.As(err, &na) {
		return na.class
	}
	return addrUnknown
}
