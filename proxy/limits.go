package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/airlock-dev/airlock/broker"
)

// limiter enforces per-handle and per-plugin request rates and a
// per-plugin cap on requests in flight. Entries unused for idleAfter are
// swept, so the maps stay bounded by the live handles and plugins.
type limiter struct {
	cfg     LimitsConfig
	handles sync.Map // handle fingerprint -> *rateEntry
	plugins sync.Map // plugin id -> *pluginEntry
}

type rateEntry struct {
	lim  *rate.Limiter
	last atomic.Int64
}

type pluginEntry struct {
	rateEntry
	inflight atomic.Int32
}

func newLimiter(cfg LimitsConfig) *limiter { return &limiter{cfg: cfg} }

// admit checks g's rates and takes a concurrency slot; the returned
// release must be called once when the request is over.
func (l *limiter) admit(g *broker.Grant, now time.Time) (func(), *denial) {
	h := l.handleEntry(g.Fingerprint)
	p := l.pluginEntry(g.PluginID)
	ns := now.UnixNano()
	h.last.Store(ns)
	p.last.Store(ns)
	if !h.lim.AllowN(now, 1) {
		return nil, deny(CodeRateLimited, "too many requests for this handle").withReason("per-handle rate")
	}
	if !p.lim.AllowN(now, 1) {
		return nil, deny(CodeRateLimited, "too many requests for this plugin").withReason("per-plugin rate")
	}
	if max := l.cfg.PerPluginConcurrency; max > 0 {
		if p.inflight.Add(1) > int32(max) {
			p.inflight.Add(-1)
			return nil, deny(CodeTooManyConcurrent, "too many requests in flight for this plugin")
		}
		var once sync.Once
		return func() { once.Do(func() { p.inflight.Add(-1) }) }, nil
	}
	return func() {}, nil
}

func (l *limiter) handleEntry(fp string) *rateEntry {
	if v, ok := l.handles.Load(fp); ok {
		return v.(*rateEntry)
	}
	e := &rateEntry{lim: rate.NewLimiter(limit(l.cfg.PerHandleRPS), l.cfg.PerHandleBurst)}
	v, _ := l.handles.LoadOrStore(fp, e)
	return v.(*rateEntry)
}

func (l *limiter) pluginEntry(id string) *pluginEntry {
	if v, ok := l.plugins.Load(id); ok {
		return v.(*pluginEntry)
	}
	e := &pluginEntry{rateEntry: rateEntry{lim: rate.NewLimiter(limit(l.cfg.PerPluginRPS), l.cfg.PerPluginBurst)}}
	v, _ := l.plugins.LoadOrStore(id, e)
	return v.(*pluginEntry)
}

func limit(rps float64) rate.Limit { return rate.Limit(rps) }

// sweep drops entries idle since before cutoff (plugin entries only when
// nothing is in flight).
func (l *limiter) sweep(cutoff time.Time) {
	c := cutoff.UnixNano()
	l.handles.Range(func(k, v any) bool {
		if v.(*rateEntry).last.Load() < c {
			l.handles.Delete(k)
		}
		return true
	})
	l.plugins.Range(func(k, v any) bool {
		if e := v.(*pluginEntry); e.last.Load() < c && e.inflight.Load() == 0 {
			l.plugins.Delete(k)
		}
		return true
	})
}
