package proxy

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// Upstream connections are shared state: a connection pool keyed only by
// destination lets one plugin read another's answer when an upstream's
// framing goes astray — a stray response sent some time after a complete
// one arrives after the reuse check and is read as the next request's
// answer, with the first plugin's secret echoed in it, unredacted, since
// the echo guard knows only the second request's secret. So every pool
// (this HTTP/1.1 one, the HTTP/2 transports in h2pool.go) is keyed by
// the destination and by who the request is sent for: the plugin and the
// credential (intent, secret version, lease), and the client certificate
// when one is presented. The worst a desynchronised upstream can then do
// is confuse a plugin with itself, on the same credential.

// credKey is who an upstream request is sent for. It holds names and a
// version, never a secret: a secret's version changes when its value
// does (Vault's KV versions; the file source counts its changes), and a
// dynamic secret has a lease of its own.
type credKey struct {
	plugin  string // the grant's plugin; "" for the proxy's own requests (token fetches)
	intent  string
	version int
	lease   string // the lease fingerprint of a dynamic secret
}

// credential is the key of the exchange's current credential: its
// plugin, intent and secret (which changes on a rotation retry).
func (x *exchange) credential() credKey {
	return credKey{plugin: x.grant.PluginID, intent: x.grant.Intent, version: x.secret.Version, lease: x.secret.Lease}
}

// poolKey is what an HTTP/1.1 upstream connection is pooled under.
type poolKey struct {
	authority string // the URL's host[:port]
	cert      string // the client certificate's id (client_cert), if any
	cred      credKey
}

// idlePool holds the idle HTTP/1.1 connections: at most perKey per pool
// key and total across all of them. Past total, the connection idle the
// longest is closed, whichever key it has, so plugins and credentials
// that come and go cannot grow the pool without bound. Empty keys are
// dropped by sweep.
type idlePool struct {
	timeout time.Duration // idle_conn_timeout
	perKey  int           // max_idle_conns_per_host
	total   int           // max_idle_conns

	mu    sync.Mutex
	byKey map[poolKey][]*upConn // each oldest first
	lru   connList              // every idle connection, oldest first
}

// get takes the most recently used live-looking idle connection of key,
// closing the ones past idle_conn_timeout; nil when there is none.
func (p *idlePool) get(key poolKey) *upConn {
	var stale []*upConn
	defer closeConns(&stale)
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := p.byKey[key]
	for len(conns) > 0 {
		pc := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		p.lru.remove(pc)
		if time.Since(pc.lastUsed) < p.timeout {
			// The empty slice stays for the connection's return: a
			// key in steady use allocates nothing.
			p.byKey[key] = conns
			return pc
		}
		stale = append(stale, pc)
	}
	delete(p.byKey, key)
	return nil
}

// put returns pc to the pool, or closes it.
func (p *idlePool) put(pc *upConn) {
	var closing []*upConn
	defer closeConns(&closing)
	pc.lastUsed = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Bytes already read past the response's end (a 204 or a HEAD
	// answer with a body, a second response): the upstream's framing
	// and the proxy's disagree, so the connection carries nothing more.
	if pc.Buffered() || len(p.byKey[pc.key]) >= p.perKey || p.total <= 0 {
		closing = append(closing, pc)
		return
	}
	if p.byKey == nil {
		p.byKey = map[poolKey][]*upConn{}
	}
	p.byKey[pc.key] = append(p.byKey[pc.key], pc)
	p.lru.pushBack(pc)
	for p.lru.n > p.total {
		closing = append(closing, p.evictOldestLocked())
	}
}

// evictOldestLocked takes the connection idle the longest out of the
// pool. Connections of a key join the pool in the order they join lru,
// so it is the first of its key's.
func (p *idlePool) evictOldestLocked() *upConn {
	pc := p.lru.head
	p.lru.remove(pc)
	conns := p.byKey[pc.key]
	if i := slices.Index(conns, pc); i >= 0 {
		conns = slices.Delete(conns, i, i+1) // i is 0 but for a bug
	}
	if len(conns) == 0 {
		delete(p.byKey, pc.key)
	} else {
		p.byKey[pc.key] = conns
	}
	return pc
}

// sweep closes the connections idle since before cutoff and drops the
// keys left with none (Serve runs it every minute): a plugin or a secret
// version that is gone leaves nothing behind.
func (p *idlePool) sweep(cutoff time.Time) {
	var stale []*upConn
	defer closeConns(&stale)
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.lru.head != nil && p.lru.head.lastUsed.Before(cutoff) {
		stale = append(stale, p.evictOldestLocked())
	}
	for k, conns := range p.byKey {
		if len(conns) == 0 {
			delete(p.byKey, k)
		}
	}
}

// closeAll closes every idle connection.
func (p *idlePool) closeAll() {
	var all []*upConn
	defer closeConns(&all)
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.lru.head != nil {
		all = append(all, p.evictOldestLocked())
	}
	clear(p.byKey)
}

// size is the number of idle connections and of keys holding any.
func (p *idlePool) size() (conns, keys int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.byKey {
		if len(c) > 0 {
			keys++
		}
	}
	return p.lru.n, keys
}

// closeConns closes the connections in *cs: called after the pool's lock
// is released, since closing a TLS connection writes to it.
func closeConns(cs *[]*upConn) {
	for _, pc := range *cs {
		pc.Close()
	}
}

// connList is a doubly linked list of idle connections through their
// prev and next fields: O(1) to add, take out and evict, no allocation.
type connList struct {
	head, tail *upConn
	n          int
}

func (l *connList) pushBack(pc *upConn) {
	pc.prev, pc.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = pc
	} else {
		l.head = pc
	}
	l.tail = pc
	l.n++
}

func (l *connList) remove(pc *upConn) {
	if pc.prev != nil {
		pc.prev.next = pc.next
	} else {
		l.head = pc.next
	}
	if pc.next != nil {
		pc.next.prev = pc.prev
	} else {
		l.tail = pc.prev
	}
	pc.prev, pc.next = nil, nil
	l.n--
}

// CloseIdleConnections closes every pooled connection.
func (u *upstreamClient) CloseIdleConnections() { u.idle.closeAll() }

// transport is u as an http.RoundTripper for requests made for cred (the
// OAuth2 processors' token fetches, through golang.org/x/oauth2).
func (u *upstreamClient) transport(cred credKey) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) { return u.RoundTrip(req, cred) })
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
