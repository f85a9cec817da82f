package broker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Grant cache timing: an entry is served for at most maxCacheAge, and
// only while a probe published less than feedStale ago came back over the
// invalidation feed (one is published every feedPing).
const (
	maxCacheAge = 30 * time.Second
	feedStale   = 3 * time.Second
	feedPing    = time.Second
)

// grantCache is a replica's bounded, in-memory copy of grants it resolved.
// Revocations invalidate it through the store's pub/sub channel (and at
// once for this replica's own). Safety rules: an entry is used only while
// the feed is live; every invalidation bumps a generation, and a grant
// read from Redis is cached only if no invalidation happened while it
// was read, so a revocation can never be overwritten by a stale read.
// All methods are nil-safe (a nil cache is off).
type grantCache struct {
	size  int
	stale time.Duration // the feed must have proven itself within this

	mu       sync.Mutex
	gen      uint64
	heard    time.Time // when the newest probe that came back was sent
	downAt   time.Time // a probe sent before this proves nothing
	live     bool      // proven, and nothing missed since the cache was emptied
	entries  map[string]cached
	byInv    map[string]map[string]struct{}
	byPlugin map[string]map[string]struct{}
}

type cached struct {
	g      *Grant
	stored time.Time
}

func newGrantCache(size int) *grantCache {
	return &grantCache{size: size, stale: feedStale, entries: map[string]cached{}, byInv: map[string]map[string]struct{}{},
		byPlugin: map[string]map[string]struct{}{}}
}

// begin returns the generation to pass to put, and whether the cache may
// be used now.
func (c *grantCache) begin() (uint64, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen, c.live && time.Since(c.heard) < c.stale
}

func (c *grantCache) get(hk string) *Grant {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hk]
	if !ok || time.Since(e.stored) > maxCacheAge {
		return nil
	}
	g := *e.g
	return &g
}

func (c *grantCache) put(gen uint64, hk string, g *Grant) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !c.live {
		return // an invalidation ran while g was read
	}
	if len(c.entries) >= c.size {
		for k := range c.entries { // evict an arbitrary entry
			c.dropLocked(k)
			break
		}
	}
	cp := *g
	c.entries[hk] = cached{g: &cp, stored: time.Now()}
	add := func(idx map[string]map[string]struct{}, id string) {
		if idx[id] == nil {
			idx[id] = map[string]struct{}{}
		}
		idx[id][hk] = struct{}{}
	}
	add(c.byInv, g.InvocationID)
	add(c.byPlugin, g.PluginID)
}

func (c *grantCache) dropLocked(hk string) {
	e, ok := c.entries[hk]
	if !ok {
		return
	}
	delete(c.entries, hk)
	for idx, id := range map[*map[string]map[string]struct{}]string{&c.byInv: e.g.InvocationID, &c.byPlugin: e.g.PluginID} {
		if set := (*idx)[id]; set != nil {
			delete(set, hk)
			if len(set) == 0 {
				delete(*idx, id)
			}
		}
	}
}

// invalidate applies one revocation message: "inv:<id>" or "plg:<id>".
func (c *grantCache) invalidate(msg string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	var keys map[string]struct{}
	switch {
	case strings.HasPrefix(msg, "inv:"):
		keys = c.byInv[strings.TrimPrefix(msg, "inv:")]
	case strings.HasPrefix(msg, "plg:"):
		keys = c.byPlugin[strings.TrimPrefix(msg, "plg:")]
	case strings.HasPrefix(msg, "h:"):
		keys = map[string]struct{}{strings.TrimPrefix(msg, "h:"): {}}
	default:
		c.resetLocked()
		return
	}
	for hk := range keys {
		c.dropLocked(hk)
	}
}

func (c *grantCache) resetLocked() {
	c.gen++
	c.entries = map[string]cached{}
	c.byInv = map[string]map[string]struct{}{}
	c.byPlugin = map[string]map[string]struct{}{}
}

// down stops the cache's use: the feed is not proven to hear the primary
// until a probe published from now on comes back over it.
func (c *grantCache) down() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.live = false
	c.downAt = time.Now()
}

// proven records that a probe published at sent came back over the feed.
// Going live, or coming back after a silence long enough to have stopped
// the cache's use, empties the cache: what was missed meanwhile is unknown.
func (c *grantCache) proven(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sent.Before(c.downAt) {
		return
	}
	if !c.live || sent.Sub(c.heard) >= c.stale {
		c.resetLocked()
		c.live = true
	}
	if sent.After(c.heard) {
		c.heard = sent
	}
}

// Run keeps the local grant cache's invalidation feed until ctx ends, and
// keeps it on the current primary.
//
// A subscription alone proves nothing: after a Sentinel failover, the
// failover client moves its ordinary connections to the new primary but
// not the subscription, and a stalled old primary that comes back answers
// pings while revocations are published elsewhere. So the feed proves
// itself end to end: every feedPing it publishes a probe through the
// store's ordinary (write) path, which goes to the current primary, and
// the cache is used only while a probe sent less than feedStale ago has
// come back over the subscription. A subscription that stops proving
// itself is dropped and made again, which asks Sentinel for the primary.
//
// It also watches for a primary change (see watchPrimary): revocations
// are written again, and the cache waits for its feed on the new primary.
func (s *RedisStore) Run(ctx context.Context) {
	defer s.leave()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); s.watchPrimary(ctx) }()
	if s.sentinel != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.watchSentinel(ctx) }()
	}
	if s.cache == nil {
		<-ctx.Done()
		return
	}
	for ctx.Err() == nil {
		s.follow(ctx)
		s.cache.down()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// follow holds one subscription until it fails to prove itself within
// the cache's staleness bound, breaks, or ctx ends.
func (s *RedisStore) follow(ctx context.Context) {
	epoch := s.epoch.Load()
	ps := s.rdb.Subscribe(ctx, s.channel(), s.probeChannel)
	defer ps.Close()
	sent := map[string]time.Time{} // probe -> when it was published
	var seq uint64
	var lastProbe time.Time // when the last probe was sent
	proof := time.Now()     // a new subscription has feedStale to prove itself
	for ctx.Err() == nil {
		now := time.Now()
		if now.Sub(proof) >= s.cache.stale || s.epoch.Load() != epoch {
			return // quiet too long, or the primary changed: subscribe afresh
		}
		if now.Sub(lastProbe) >= s.feedPing {
			lastProbe = now
			for k, at := range sent {
				if now.Sub(at) >= s.cache.stale {
					delete(sent, k)
				}
			}
			seq++
			p := strconv.FormatUint(seq, 10)
			pctx, cancel := context.WithTimeout(ctx, s.feedPing)
			// Only a probe whose PUBLISH was answered counts: one that
			// timed out may sit in a stalled server's buffer and run when
			// it wakes, long after it was sent.
			if s.rdb.Publish(pctx, s.probeChannel, p).Err() == nil {
				sent[p] = now
			}
			cancel()
		}
		msg, err := ps.ReceiveTimeout(ctx, max(time.Until(lastProbe.Add(s.feedPing)), time.Millisecond))
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				// go-redis resubscribed on a new connection: what was
				// published in between is unknown until a probe proves
				// the new one.
				s.cache.down()
			}
		case *redis.Message:
			if m.Channel != s.probeChannel {
				s.cache.invalidate(m.Payload)
				if s.fedInvalidation != nil {
					s.fedInvalidation(m.Payload)
				}
				continue
			}
			// Only this subscription's own probes count, dated when they
			// were sent: a probe a stalled server delivers late proves
			// nothing about now.
			if at, ok := sent[m.Payload]; ok {
				delete(sent, m.Payload)
				if at.After(proof) {
					proof = at
				}
				s.cache.proven(at)
			}
		default:
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				return // the connection broke: subscribe afresh
			}
		}
	}
}
