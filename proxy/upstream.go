package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
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

type upConn struct {
	conn     *tls.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	key      poolKey
	class    addrClass // of the address dialled, for the audit line
	lastUsed time.Time
	probe    *h1.IdleProbe // the socket under conn, checked before each reuse
	// prev and next link the pool's idle connections, oldest first.
	prev, next *upConn
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
			if pc != nil && !pc.alive() {
				pc.conn.Close()
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
				return nil, err
			}
		}
		resp, err := u.send(pc, req)
		if err == nil {
			return resp, nil
		}
		pc.conn.Close()
		if !reused || !replayable || req.Context().Err() != nil {
			return nil, err
		}
		// The pooled connection was stale: retry once on a new one.
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req.Body = body
		}
	}
}

func (u *upstreamClient) connect(ctx context.Context, addr string, key poolKey, serverName string, cc *clientCert) (*upConn, error) {
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
	tc := tls.Client(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, u.tlsTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return &upConn{conn: tc, br: bufio.NewReaderSize(tc, 16<<10), bw: bufio.NewWriterSize(tc, 16<<10), key: key,
		class: class, probe: h1.NewIdleProbe(raw)}, nil
}

// send writes req and reads the response head on pc.
func (u *upstreamClient) send(pc *upConn, req *http.Request) (*http.Response, error) {
	// Cancellation (client gone, deadline) unblocks reads and writes.
	stop := context.AfterFunc(req.Context(), func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	if err := h1.WriteRequest(pc.bw, req); err != nil {
		stop()
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		stop()
		return nil, err
	}
	if u.respTimeout > 0 {
		_ = pc.conn.SetReadDeadline(time.Now().Add(u.respTimeout))
	}
	var resp *http.Response
	var err error
	for {
		resp, err = h1.ReadResponse(pc.br, req)
		if err != nil {
			stop()
			return nil, err
		}
		// Interim responses (100 Continue, 103 Early Hints) precede the
		// real one; a protocol switch is never asked for (Upgrade is
		// stripped), so it is an error.
		if resp.StatusCode == http.StatusSwitchingProtocols {
			stop()
			return nil, fmt.Errorf("upstream switched protocols unasked")
		}
		if resp.StatusCode >= 200 || resp.StatusCode < 100 {
			break
		}
	}
	_ = pc.conn.SetReadDeadline(time.Time{})
	resp.Body = &upBody{rc: resp.Body, pc: pc, u: u, stop: stop, reusable: !resp.Close,
		eof: resp.Body == http.NoBody}
	return resp, nil
}

// alive reports whether an idle connection is still open. Nothing may
// arrive on an idle connection, so any byte waiting (a close_notify, junk)
// or the end of the stream means it must not carry a request.
func (pc *upConn) alive() bool {
	if pc.br.Buffered() > 0 || !pc.probe.Idle() {
		return false
	}
	// Plaintext the TLS layer decrypted but br did not take (a record
	// split at a response's end) is in neither place: a read that
	// cannot wait finds it. A read timeout leaves tls.Conn usable.
	_ = pc.conn.SetReadDeadline(time.Unix(1, 0)) // long past: the read returns at once
	_, err := pc.br.Peek(1)
	_ = pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// upBody returns its connection to the pool at EOF, and closes it if the
// body is abandoned before the end.
type upBody struct {
	rc       io.ReadCloser
	pc       *upConn
	u        *upstreamClient
	stop     func() bool
	reusable bool
	eof      bool
	once     sync.Once
}

func (b *upBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *upBody) Close() error {
	var err error
	b.once.Do(func() {
		if !b.stop() {
			// The request's context ended: the deadline is poisoned.
			b.reusable = false
		}
		if b.eof && b.reusable {
			err = b.rc.Close()
			b.u.idle.put(b.pc)
			return
		}
		// Close the connection first: the body's Close would otherwise
		// read the rest of an abandoned response.
		b.pc.conn.Close()
		_ = b.rc.Close()
	})
	return err
}
