package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// upstreamClient sends a request over a pooled HTTP/1.1 TLS connection on
// the calling goroutine. http.Transport keeps a read and a write goroutine
// per connection and hands every request and response between them; at a
// proxy's request rates those hand-offs were a quarter of the CPU.
//
// Connections are pooled per destination and per credential
// (upstream_pool.go): a connection made for one plugin's request with one
// secret never carries a request of another plugin, or of another
// credential, so an upstream whose framing goes astray (a stray response
// after a complete one, which no liveness check can see coming) can
// confuse a plugin only with itself.
//
// Reuse rules: a connection goes back to the pool only after its response
// body was read to the end, neither side asked to close, and nothing was
// read past that end. A request takes a pooled connection only after a
// liveness check shows nothing arrived on it while idle (the upstream's
// close, or bytes of an answer to no request, which would otherwise be
// read as this request's answer). A request that fails on a reused
// connection before any response arrives is retried once on a new
// connection if its body can be replayed. A request whose body cannot be
// replayed (a streamed POST) is never retried.
type upstreamClient struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, addrClass, error)
	tlsConfig   *tls.Config
	tlsTimeout  time.Duration
	respTimeout time.Duration
	idle        idlePool
}

// upConn is a pooled upstream connection: the HTTP/1.1 wire (h1) and
// what the pool and the audit line need of it.
type upConn struct {
	*h1.ClientConn
	key      poolKey
	class    addrClass // of the address dialled, for the audit line
	lastUsed time.Time
	// prev and next link the pool's idle connections, oldest first.
	prev, next *upConn
	// reuse hands the connection back to its pool (made once, not per
	// request).
	reuse func()
}

func newUpstreamClient(c Config, d *dialer, tlsConfig *tls.Config) *upstreamClient {
	return &upstreamClient{
		dial: d.dial, tlsConfig: tlsConfig,
		tlsTimeout: c.Upstream.TLSHandshakeTimeout, respTimeout: c.Upstream.ResponseTimeout,
		idle: idlePool{timeout: c.Upstream.IdleConnTimeout, perKey: c.Upstream.MaxIdleConnsPerHost, total: c.Upstream.MaxIdleConns},
	}
}

// RoundTrip sends req (an https:// URL), made for the credential cred,
// and returns the response; its body hands the connection back to the
// pool when read to the end.
func (u *upstreamClient) RoundTrip(req *http.Request, cred credKey) (*http.Response, error) {
	resp, _, err := u.roundTrip(req, cred)
	return resp, err
}

// roundTrip is RoundTrip that also returns the class of the address the
// connection that carried req was dialled to.
func (u *upstreamClient) roundTrip(req *http.Request, cred credKey) (*http.Response, addrClass, error) {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	// Connections are pooled per destination (the URL's authority: a
	// host without a port is port 443, as prepare writes it), credential
	// and client certificate. The dial address is built only for a new
	// connection.
	key, cc := poolKey{authority: req.URL.Host, cred: cred}, clientCertOf(req.Context())
	if cc != nil {
		key.cert = cc.id
	}
	for attempt := 0; ; attempt++ {
		var pc *upConn
		if attempt == 0 {
			pc = u.idle.get(key)
			// Any pooled connection, not only one for a body that
			// cannot be replayed: bytes that came after its last
			// response would be read as this request's answer.
			if pc != nil && !pc.Alive() {
				pc.Close()
				pc = nil
			}
		}
		reused := pc != nil
		if pc == nil {
			var err error
			addr := req.URL.Host
			if req.URL.Port() == "" {
				addr = net.JoinHostPort(req.URL.Hostname(), "443")
			}
			if pc, err = u.connect(req.Context(), addr, key, req.URL.Hostname(), cc); err != nil {
				return nil, refusedClass(err), err
			}
		}
		resp, err := pc.RoundTrip(req, u.respTimeout, pc.reuse)
		if err == nil {
			return resp, pc.class, nil
		}
		pc.Close()
		if !reused || !replayable || req.Context().Err() != nil {
			return nil, pc.class, err
		}
		// The pooled connection was stale: retry once on a new one.
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, pc.class, err
			}
			req.Body = body
		}
	}
}

func (u *upstreamClient) connect(ctx context.Context, addr string, key poolKey, serverName string, cc *clientCert) (*upConn, error) {
	// The dial and handshake reported as net/http's transports report
	// them (the request's span, trace.go).
	ct := httptrace.ContextClientTrace(ctx)
	if ct != nil && ct.GetConn != nil {
		ct.GetConn(addr)
	}
	raw, class, err := u.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := u.tlsConfig.Clone()
	cfg.ServerName = serverName
	if cc != nil {
		cfg.Certificates = []tls.Certificate{cc.cert}
	}
	cfg.NextProtos = []string{"http/1.1"}
	guarded := h1.Guard(raw)
	tc := tls.Client(guarded, cfg)
	hctx, cancel := context.WithTimeout(ctx, u.tlsTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	if ct != nil && ct.GotConn != nil {
		ct.GotConn(httptrace.GotConnInfo{Conn: tc})
	}
	pc := &upConn{ClientConn: h1.NewClientConn(tc, guarded), key: key, class: class}
	pc.reuse = func() { u.idle.put(pc) }
	return pc, nil
}
