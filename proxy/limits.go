package proxy

import (
	"context"
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
	global  GlobalLimiter // nil: the rates hold per replica
	handles sync.Map      // handle fingerprint -> *rateEntry
	plugins sync.Map      // plugin id -> *pluginEntry
}

// GlobalLimiter enforces rates across replicas (broker.RedisStore).
type GlobalLimiter interface {
	AllowRates(ctx context.Context, rates ...broker.Rate) (ok bool, refused int, retry time.Duration, err error)
}

var _ GlobalLimiter = (*broker.RedisStore)(nil)

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
// slot must be released when the request is over (a second release does
// nothing). The local rates
// are a first stage; with a global limiter the request must pass it too.
func (l *limiter) admit(ctx context.Context, g *broker.Grant, now time.Time) (slot, *denial) {
	h := l.handleEntry(g.Fingerprint)
	p := l.pluginEntry(g.PluginID)
	ns := now.UnixNano()
	h.last.Store(ns)
	p.last.Store(ns)
	if !h.lim.AllowN(now, 1) {
		return slot{}, deny(CodeRateLimited, "too many requests for this handle").withReason("per-handle rate")
	}
	if !p.lim.AllowN(now, 1) {
		return slot{}, deny(CodeRateLimited, "too many requests for this plugin").withReason("per-plugin rate")
	}
	if l.global != nil {
		ok, refused, _, err := l.global.AllowRates(ctx,
			broker.Rate{Key: "h:" + g.Fingerprint, RPS: l.cfg.PerHandleRPS, Burst: l.cfg.PerHandleBurst},
			broker.Rate{Key: "p:" + g.PluginID, RPS: l.cfg.PerPluginRPS, Burst: l.cfg.PerPluginBurst})
		switch {
		case err != nil:
			return slot{}, deny(CodeLimitsUnavailable, "the shared rate limits cannot be checked; no request was sent").withReason("global limits: store unavailable")
		case !ok && refused == 0:
			return slot{}, deny(CodeRateLimited, "too many requests for this handle").withReason("global per-handle rate")
		case !ok:
			return slot{}, deny(CodeRateLimited, "too many requests for this plugin").withReason("global per-plugin rate")
		}
	}
	if max := l.cfg.PerPluginConcurrency; max > 0 {
		if p.inflight.Add(1) > int32(max) {
			p.inflight.Add(-1)
			return slot{}, deny(CodeTooManyConcurrent, "too many requests in flight for this plugin")
		}
		return slot{p: p}, nil
	}
	return slot{}, nil
}

// slot is a request's hold on its plugin's concurrency limit, kept by
// value in the request's exchange (no allocation per request).
type slot struct {
	p    *pluginEntry // nil: no limit, nothing to release
	done uint32
}

// release gives the slot back, once.
func (s *slot) release() {
	if s.p != nil && atomic.CompareAndSwapUint32(&s.done, 0, 1) {
		s.p.inflight.Add(-1)
	}
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
