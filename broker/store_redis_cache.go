package broker

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Grant cache timing: an entry is served for at most MaxCacheAge, and
// only while the invalidation feed was heard from within FeedStale.
const (
	MaxCacheAge = 30 * time.Second
	FeedStale   = 3 * time.Second
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
	size int

	mu       sync.Mutex
	gen      uint64
	heard    time.Time // the feed last answered
	live     bool      // subscribed, and nothing missed since the cache was emptied
	entries  map[string]cached
	byInv    map[string]map[string]struct{}
	byPlugin map[string]map[string]struct{}
}

type cached struct {
	g      *Grant
	stored time.Time
}

func newGrantCache(size int) *grantCache {
	return &grantCache{size: size, entries: map[string]cached{}, byInv: map[string]map[string]struct{}{},
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
	return c.gen, c.live && time.Since(c.heard) < FeedStale
}

func (c *grantCache) get(hk string) *Grant {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hk]
	if !ok || time.Since(e.stored) > MaxCacheAge {
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

// setLive records the feed's state: going live empties the cache (what
// was missed while down is unknown); going down stops its use.
func (c *grantCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if live && !c.live {
		c.resetLocked()
	}
	if !live {
		c.gen++
	}
	c.live = live
	if live {
		c.heard = time.Now()
	}
}

func (c *grantCache) touch() {
	c.mu.Lock()
	c.heard = time.Now()
	c.mu.Unlock()
}

// Run keeps the local grant cache's invalidation feed until ctx ends: it
// subscribes to the revocation channel, pings it every second, and
// bypasses the cache whenever the feed is not known to be live.
func (s *RedisStore) Run(ctx context.Context) {
	if s.cache == nil {
		return
	}
	ps := s.rdb.Subscribe(ctx, s.channel())
	defer ps.Close()
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, feedPing)
		var ne net.Error
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				s.cache.setLive(true)
			}
		case *redis.Message:
			s.cache.invalidate(m.Payload)
			s.cache.touch()
		case *redis.Pong:
			s.cache.touch()
		default:
			if errors.As(err, &ne) && ne.Timeout() {
				// Quiet: ask the feed to prove it is alive.
				if perr := ps.Ping(ctx); perr != nil {
					s.cache.setLive(false)
				}
				continue
			}
			if err != nil && ctx.Err() == nil {
				// The connection broke: go-redis resubscribes on the next
				// Receive; until then nothing from the cache.
				s.cache.setLive(false)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
}
