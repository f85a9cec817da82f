package proxy

import (
	"crypto/tls"
	"net/http"
	"sync"
)

// The upstream side of requests that came as HTTP/2. http.Transport
// pools its connections by destination alone and offers no way to key
// them further, so the proxy keeps one transport per plugin and
// credential: two plugins, or two credentials, never share an upstream
// connection or an HTTP/2 stream multiplex (upstream_pool.go says why).
// (A client certificate is not presented on these connections; see the
// client_cert kind in docs/broker.md.) The transports are bounded: past
// maxH2Transports the one used least recently is dropped and its idle
// connections closed (a request still running on it finishes; its
// connection then closes after idle_conn_timeout).

// maxH2Transports bounds the per-credential HTTP/2 transports.
const maxH2Transports = 256

// h2Pools holds the transports.
type h2Pools struct {
	cfg       Config
	d         *dialer
	tlsConfig *tls.Config
	max       int

	mu    sync.Mutex
	m     map[credKey]*h2Transport
	clock uint64 // counts uses, for least-recently-used eviction
}

type h2Transport struct {
	t    *http.Transport
	used uint64
}

func newH2Pools(c Config, d *dialer, tlsConfig *tls.Config) *h2Pools {
	return &h2Pools{cfg: c, d: d, tlsConfig: tlsConfig, max: maxH2Transports}
}

// transport is the transport for requests made for cred.
func (p *h2Pools) transport(cred credKey) *http.Transport {
	var evicted *http.Transport
	defer func() {
		if evicted != nil {
			evicted.CloseIdleConnections()
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clock++
	if e := p.m[cred]; e != nil {
		e.used = p.clock
		return e.t
	}
	if p.m == nil {
		p.m = map[credKey]*h2Transport{}
	}
	if len(p.m) >= p.max {
		var oldest credKey
		var least uint64
		for key, e := range p.m {
			if evicted == nil || e.used < least {
				oldest, least, evicted = key, e.used, e.t
			}
		}
		delete(p.m, oldest)
	}
	t := newH2Transport(p.cfg, p.d, p.tlsConfig)
	p.m[cred] = &h2Transport{t: t, used: p.clock}
	return t
}

// closeIdle closes every transport's idle connections.
func (p *h2Pools) closeIdle() {
	p.mu.Lock()
	ts := make([]*http.Transport, 0, len(p.m))
	for _, e := range p.m {
		ts = append(ts, e.t)
	}
	p.mu.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
}

// len is the number of transports kept.
func (p *h2Pools) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// newH2Transport is an upstream transport for requests that came as
// HTTP/2: ALPN offers h2 and http/1.1, the dial is the SSRF-safe one,
// and TLS verifies as the HTTP/1.1 pool does. It has no response-header
// timeout: a gRPC server answers a client stream only when it ends, so
// the call's own deadline (the client's grpc-timeout, its cancel) bounds
// the wait.
func newH2Transport(c Config, d *dialer, tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.dialClassed,
		TLSClientConfig:     tlsConfig.Clone(),
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: c.Upstream.TLSHandshakeTimeout,
		IdleConnTimeout:     c.Upstream.IdleConnTimeout,
		MaxIdleConnsPerHost: c.Upstream.MaxIdleConnsPerHost,
		DisableCompression:  true,
	}
}
