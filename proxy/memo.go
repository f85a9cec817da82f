package proxy

import (
	"sync"
	"sync/atomic"
)

// memo is a concurrent map bounded by clearing it when full: the hot
// path's caches (echo forms, normalized hosts, intercept leaves) hold a
// few entries that are used over and over, so an occasional refill is
// cheaper than eviction bookkeeping, and a rotated value never lingers.
type memo[K comparable, V any] struct {
	m   sync.Map
	n   atomic.Int32
	max int32
}

func (c *memo[K, V]) load(k K) (V, bool) {
	v, ok := c.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (c *memo[K, V]) store(k K, v V) {
	if c.n.Add(1) > c.max {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(k, v)
}

// size is how many entries were stored since the last clear.
func (c *memo[K, V]) size() int32 { return c.n.Load() }
