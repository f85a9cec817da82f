package host

import (
	"context"
	"time"

	"github.com/airlock-dev/airlock/internal/supervise"
)

// Restart backoff for a provider that exits unexpectedly, and how often a
// running one is asked for its health.
const (
	RestartBaseDelay = time.Second
	RestartMaxDelay  = 30 * time.Second
	HealthInterval   = 10 * time.Second
)

// Supervise launches inst and keeps it running until ctx ends: when the
// process exits without being shut down, the host revokes every handle the
// plugin held, records lifecycle.crash, and launches it again after 1 s,
// 2 s, 4 s … (at most 30 s; the delay resets after a minute of uptime).
// The first launch's error is returned; later failures are retried.
func (h *Host) Supervise(ctx context.Context, inst Installed, opts Options) error {
	p, err := Launch(ctx, inst, opts)
	if err != nil {
		return err
	}
	h.Add(p)
	go h.supervise(ctx, inst, opts, p)
	return nil
}

func (h *Host) supervise(ctx context.Context, inst Installed, opts Options, p *Plugin) {
	b := supervise.Backoff{Base: RestartBaseDelay, Max: RestartMaxDelay, ResetAfter: time.Minute}
	for {
		started := time.Now()
		tick := time.NewTicker(HealthInterval)
	wait:
		for {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case <-p.Exited():
				break wait
			case <-tick.C:
				hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				if err := p.Health(hctx); err != nil {
					p.log.Warn("plugin is not serving; calls are refused until it is", "err", err)
				}
				cancel()
			}
		}
		tick.Stop()
		p.mu.Lock()
		intentional := p.closed
		p.mu.Unlock()
		if intentional || ctx.Err() != nil {
			return
		}
		b.Ran(time.Since(started))
		b.Fail()
		p.log.Warn("provider exited unexpectedly; restarting", "in", b.Delay())
		if opts.Broker != nil {
			if _, err := opts.Broker.RevokePlugin(context.WithoutCancel(ctx), inst.Name); err != nil {
				p.log.Error("revoke handles of the crashed plugin", "err", err)
			}
		}
		p.record("lifecycle.crash", "", map[string]any{"uptime_ms": time.Since(started).Milliseconds()})
		p.cleanup()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.Delay()):
			}
			np, err := Launch(ctx, inst, opts)
			if err == nil {
				h.Add(np)
				p = np
				break
			}
			if ctx.Err() != nil {
				return
			}
			b.Fail()
			opts.Log.Warn("relaunch failed", "plugin", inst.Name, "err", err, "next_in", b.Delay())
		}
	}
}
