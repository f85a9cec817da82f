package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Owed revocations. A revocation the store could not make durable (Redis
// unreachable, or applied on the primary but confirmed by no replica) is
// never dropped: the broker keeps it, refuses what it covers on this
// replica at once, and writes it again with backoff until the store
// acknowledges it or everything it covers has expired. It lives in this
// process's memory: the host, which asked for it, is told it is owed and
// keeps asking until a replica acknowledges it (see host/leases.go), so a
// restart of this replica loses nothing the host does not still hold.

// What an owed revocation covers.
const (
	owedInvocation = "invocation"
	owedPlugin     = "plugin"
	owedHandle     = "handle" // by fingerprint: an operator revocation
)

// Backoff of owed revocations: the first retry soon, then doubling up to
// owedMaxBackoff, short because another replica may serve what an owed
// revocation covers from the store as soon as the store is back.
const (
	owedFirstBackoff = 100 * time.Millisecond
	owedMaxBackoff   = time.Second
)

// owedRevocation is one revocation the store has not acknowledged.
type owedRevocation struct {
	kind string
	id   string    // invocation id, plugin id or handle fingerprint
	at   time.Time // when it was asked for: a plugin's covers grants issued up to then
	// until: everything it covers has expired by then; it is dropped.
	until    time.Time
	attempts int
	next     time.Time
}

// owedLedger is a broker's owed revocations. Its methods are safe for
// concurrent use; covers costs one atomic load while nothing is owed.
type owedLedger struct {
	n     atomic.Int64 // len(items), for the resolve fast path
	mu    sync.Mutex
	items map[string]*owedRevocation // kind + "\x00" + id
}

func owedKey(kind, id string) string { return kind + "\x00" + id }

// add records o, or keeps the earlier record of the same revocation (a
// plugin's keeps the later watermark: it covers more).
func (l *owedLedger) add(o *owedRevocation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.items == nil {
		l.items = map[string]*owedRevocation{}
	}
	k := owedKey(o.kind, o.id)
	if cur := l.items[k]; cur != nil {
		if o.at.After(cur.at) {
			cur.at = o.at
		}
		if o.until.After(cur.until) {
			cur.until = o.until
		}
		return
	}
	l.items[k] = o
	l.n.Store(int64(len(l.items)))
}

// settle drops the record of a revocation the store acknowledged (only
// the same attempt's: a later, wider one of the same plugin stays).
func (l *owedLedger) settle(kind, id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := owedKey(kind, id)
	if cur := l.items[k]; cur != nil && !cur.at.After(at) {
		delete(l.items, k)
		l.n.Store(int64(len(l.items)))
	}
}

// covers reports whether an owed revocation covers g.
func (l *owedLedger) covers(g *Grant) bool {
	if l.n.Load() == 0 || g == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.items[owedKey(owedInvocation, g.InvocationID)] != nil || l.items[owedKey(owedHandle, g.Fingerprint)] != nil {
		return true
	}
	p := l.items[owedKey(owedPlugin, g.PluginID)]
	return p != nil && !g.IssuedAt.After(p.at)
}

// len is how many revocations are owed.
func (l *owedLedger) len() int { return int(l.n.Load()) }

// due returns copies of the revocations to try again now and drops those
// whose grants have all expired.
func (l *owedLedger) due(now time.Time) (due []owedRevocation, expired int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, o := range l.items {
		if !now.Before(o.until) {
			delete(l.items, k)
			expired++
			continue
		}
		if !now.Before(o.next) {
			due = append(due, *o)
		}
	}
	l.n.Store(int64(len(l.items)))
	return due, expired
}

// failed moves the next try of a revocation out, with backoff.
func (l *owedLedger) failed(kind, id string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o := l.items[owedKey(kind, id)]; o != nil {
		o.attempts++
		o.next = now.Add(min(owedFirstBackoff<<min(o.attempts-1, 10), owedMaxBackoff))
	}
}

// owe keeps a revocation the store did not acknowledge (cause) and says
// so: ErrRevocationOwed, wrapping cause.
func (b *Broker) owe(kind, id string, at time.Time, cause error) error {
	// Any revocation may cover a pass (the host revokes an exited
	// plugin's pass by its invocation), which lives up to pass_ttl after
	// its last renewal.
	until := at.Add(max(b.cfg.MaxHandleLifetime, b.cfg.PassTTL))
	b.owed.add(&owedRevocation{kind: kind, id: id, at: at, until: until, attempts: 1, next: at.Add(owedFirstBackoff)})
	b.metrics.owedRevocation("owed", b.owed.len())
	b.log.Error("revocation not acknowledged by the handle store; kept, enforced on this replica and retried",
		"scope", kind, "id", id, "err", cause)
	return errors.Join(ErrRevocationOwed, cause)
}

// Owed is how many revocations this replica holds that the store has not
// acknowledged.
func (b *Broker) Owed() int { return b.owed.len() }

// CheckOwed is a readiness check: not ready while revocations are owed
// (the handles they cover are refused here, but another replica may
// still serve them from the store).
func (b *Broker) CheckOwed(context.Context) error {
	if n := b.owed.len(); n > 0 {
		return &OwedError{N: n}
	}
	return nil
}

// OwedError says how many revocations are owed.
type OwedError struct{ N int }

func (e *OwedError) Error() string {
	return strconv.Itoa(e.N) + " revocations are not yet acknowledged by the handle store; retrying"
}

func (e *OwedError) Unwrap() error { return ErrRevocationOwed }

// RunOwed retries owed revocations until ctx ends.
func (b *Broker) RunOwed(ctx context.Context) {
	t := time.NewTicker(owedFirstBackoff)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.retryOwed(ctx)
		}
	}
}

// retryOwed tries every due owed revocation once. One failure ends the
// round: while the store is unreachable or unreplicated the rest would
// wait the same.
func (b *Broker) retryOwed(ctx context.Context) {
	if b.owed.len() == 0 {
		return
	}
	due, expired := b.owed.due(b.now())
	for range expired {
		b.metrics.owedRevocation("expired", b.owed.len())
	}
	for _, o := range due {
		rctx, cancel := context.WithTimeout(ctx, owedAttemptTimeout)
		n, err := b.revokeNow(rctx, o.kind, o.id, o.at)
		cancel()
		if errors.Is(err, ErrHandleUnknown) {
			err = nil // forgotten by the store: expired long ago
		}
		if err != nil {
			b.owed.failed(o.kind, o.id, b.now())
			return
		}
		b.owed.settle(o.kind, o.id, o.at)
		b.metrics.owedRevocation("landed", b.owed.len())
		b.metrics.revoke(o.kind, n)
		b.log.Info("owed revocation acknowledged by the handle store", "scope", o.kind, "id", o.id,
			"handles", n, "attempts", o.attempts+1)
	}
}

// owedAttemptTimeout bounds one retry of an owed revocation.
const owedAttemptTimeout = 5 * time.Second

// revokeNow writes one revocation to the store.
func (b *Broker) revokeNow(ctx context.Context, kind, id string, at time.Time) (int, error) {
	switch kind {
	case owedInvocation:
		n, err := b.store.RevokeInvocation(ctx, id)
		if b.leases != nil && err == nil {
			// The leases' end, too, when it was the store that failed
			// it: ending again is harmless.
			_, err = b.leases.End(ctx, id)
		}
		return n, err
	case owedPlugin:
		return b.store.RevokePlugin(ctx, id, at)
	case owedHandle:
		k, _, err := b.store.Find(ctx, id)
		if errors.Is(err, ErrHandleRevoked) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		ok, err := b.store.RevokeKey(ctx, k)
		if ok {
			return 1, err
		}
		return 0, err
	}
	return 0, errors.New("unknown revocation scope")
}
