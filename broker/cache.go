package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultReadTimeout bounds one source read made for the cache.
const DefaultReadTimeout = 10 * time.Second

// SecretCache sits in front of the secret sources: each secret is served
// from memory for TTL, concurrent misses make one read (single-flight),
// and each entry records the version it read. With StaleIfError > 0 an
// expired entry is served that much longer while the source fails;
// otherwise a failing source fails the request (closed).
type SecretCache struct {
	sources      map[string]SecretSource
	ttl          time.Duration
	staleIfError time.Duration
	now          func() time.Time
	log          *slog.Logger
	metrics      *Metrics

	mu      sync.RWMutex
	entries map[cacheKey]*cacheEntry
	gen     atomic.Uint64 // bumped by Invalidate
	sf      singleflight.Group

	// retry is how long a source that failed as unavailable is known
	// down (sourceRetry; settable by tests).
	retry  time.Duration
	downMu sync.Mutex
	down   map[string]time.Time // source -> no fresh re-read until then
}

type cacheKey struct {
	source, mount, path string
	kv                  int
}

type cacheEntry struct {
	data    SecretData
	fetched time.Time
	gen     uint64
}

// NewSecretCache returns a cache over sources (by source name).
func NewSecretCache(sources map[string]SecretSource, ttl, staleIfError time.Duration, m *Metrics, log *slog.Logger) *SecretCache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &SecretCache{
		sources: sources, ttl: ttl, staleIfError: staleIfError, now: time.Now, log: log, metrics: m,
		entries: map[cacheKey]*cacheEntry{}, retry: sourceRetry, down: map[string]time.Time{},
	}
}

// useClock makes the cache read now instead of time.Now; New hands it
// the broker's clock, so one Options.Now moves handles and secrets alike.
func (c *SecretCache) useClock(now func() time.Time) { c.now = now }

// sourceRetry is how long a secret source whose read failed as
// unavailable (Vault sealed, unreachable, refusing the token) is known
// down. Meanwhile fresh re-reads of its secrets, which an upstream 401/403
// asks for to look for a rotated version, are skipped at once instead of
// making the response wait for a read that will fail; one is let through
// per sourceRetry to notice recovery. Cache misses still read.
const sourceRetry = time.Second

// freshAllowed reports whether a fresh re-read of source may run now; a
// caller let through while the source is known down is its probe.
func (c *SecretCache) freshAllowed(source string, now time.Time) bool {
	c.downMu.Lock()
	defer c.downMu.Unlock()
	until, down := c.down[source]
	if !down {
		return true
	}
	if now.Before(until) {
		return false
	}
	c.down[source] = now.Add(c.retry)
	return true
}

// sourceState records the outcome of a read of source.
func (c *SecretCache) sourceState(source string, err error) {
	c.downMu.Lock()
	defer c.downMu.Unlock()
	switch {
	case err == nil:
		delete(c.down, source)
	case errors.Is(err, ErrSecretUnavailable):
		c.down[source] = c.now().Add(c.retry)
	}
}

// MinFreshInterval bounds fresh reads: a fresh Get within this long of the
// last read of the same secret answers from that read. An upstream that
// answers 401 to every request (which a plugin can arrange) so causes at
// most one source read per secret per interval, not one per request.
const MinFreshInterval = time.Second

// Get returns the secret ref names. fresh bypasses the cache (used after
// an upstream 401/403 to see whether Vault has a newer version), at most
// once per MinFreshInterval per secret.
func (c *SecretCache) Get(ctx context.Context, ref SecretRef, fresh bool) (SecretData, error) {
	k := cacheKey{ref.Source, ref.Mount, ref.Path, ref.KVVersion}
	now := c.now()
	c.mu.RLock()
	e := c.entries[k]
	c.mu.RUnlock()
	current := e != nil && e.gen == c.gen.Load()
	if current && (!fresh && now.Sub(e.fetched) < c.ttl || fresh && now.Sub(e.fetched) < MinFreshInterval) {
		c.metrics.cacheHit()
		return e.data, nil
	}
	c.metrics.cacheMiss()
	if fresh && !c.freshAllowed(ref.Source, now) {
		return SecretData{}, fmt.Errorf("%w: the source failed less than %s ago; not re-read", ErrSecretUnavailable, c.retry)
	}
	data, err := c.fetch(ctx, k, ref, fresh)
	if err == nil {
		return data, nil
	}
	if e != nil && c.staleIfError > 0 && now.Sub(e.fetched) < c.ttl+c.staleIfError && !errors.Is(err, ErrSecretNotFound) {
		c.metrics.staleServed()
		c.log.Warn("secret source failing; serving the cached version", "source", ref.Source, "mount", ref.Mount,
			"path", ref.Path, "version", e.data.Version, "age", now.Sub(e.fetched).Round(time.Second).String(), "err", err)
		return e.data, nil
	}
	return SecretData{}, err
}

func (c *SecretCache) fetch(ctx context.Context, k cacheKey, ref SecretRef, fresh bool) (SecretData, error) {
	src, ok := c.sources[ref.Source]
	if !ok {
		return SecretData{}, errors.Join(ErrSecretUnavailable, errors.New("secret source "+strconv.Quote(ref.Source)+" is not configured"))
	}
	gen := c.gen.Load()
	// A read started before Invalidate (or a cached-path read, for a fresh
	// one) must not answer for a later generation.
	sfKey := ref.Source + "\x00" + ref.Mount + "\x00" + ref.Path + "\x00" + strconv.Itoa(ref.KVVersion) +
		"\x00" + strconv.FormatUint(gen, 10)
	if fresh {
		sfKey += "\x00fresh"
	}
	ch := c.sf.DoChan(sfKey, func() (any, error) {
		// The read outlives any one caller's cancellation: others wait on it.
		// A caller that missed just before the previous flight stored its
		// entry must not read again: one read per TTL.
		if !fresh {
			c.mu.RLock()
			e := c.entries[k]
			c.mu.RUnlock()
			if e != nil && e.gen == gen && c.now().Sub(e.fetched) < c.ttl {
				return e.data, nil
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultReadTimeout)
		defer cancel()
		c.metrics.sourceRead(ref.Source)
		data, err := src.Read(rctx, ref)
		c.sourceState(ref.Source, err)
		if err != nil {
			c.metrics.sourceError(ref.Source)
			return SecretData{}, err
		}
		c.mu.Lock()
		c.entries[k] = &cacheEntry{data: data, fetched: c.now(), gen: gen}
		c.mu.Unlock()
		return data, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return SecretData{}, r.Err
		}
		return r.Val.(SecretData), nil
	case <-ctx.Done():
		return SecretData{}, ctx.Err()
	}
}

// invalidate makes every entry stale, so the next Get reads the source:
// after a Vault admin rotated a secret (SIGHUP, POST /v1/secrets/refresh).
func (c *SecretCache) invalidate() {
	c.gen.Add(1)
	for _, s := range c.sources {
		if r, ok := s.(interface{ Reload() error }); ok {
			if err := r.Reload(); err != nil {
				c.log.Warn("reload secret source", "err", err)
			}
		}
	}
}
