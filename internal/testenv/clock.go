//go:build linux

package testenv

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a settable time source for tests; Now is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// SkewClock runs with the real clock, Advance jumping it ahead: for a
// component whose times also meet real ones (a handle bound to a real
// invocation deadline, a renewal loop on real timers), where a frozen
// clock would read as time standing still. Safe for concurrent use.
type SkewClock struct{ skew atomic.Int64 }

// Now is the real time plus every Advance so far.
func (c *SkewClock) Now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

// Advance moves the clock d ahead of where it would be.
func (c *SkewClock) Advance(d time.Duration) { c.skew.Add(int64(d)) }
