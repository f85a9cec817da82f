package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/supervise"
)

// Supervision defaults (Options.Restart, Options.HealthInterval).
const (
	DefaultRestartBase       = time.Second
	DefaultRestartMax        = 30 * time.Second
	DefaultRestartBudget     = 3
	DefaultRestartResetAfter = time.Minute
	DefaultHealthInterval    = 10 * time.Second
	DefaultHealthTimeout     = 3 * time.Second
)

// RestartPolicy is how a plugin that crashed, failed to start or failed a
// health probe is restarted: after Base, 2·Base, 4·Base … (at most Max);
// more than Budget consecutive failures mark it failed; a run that stayed
// healthy for ResetAfter starts the count over. Healthy uptime runs from
// the launch to the last health probe the plugin passed: a run that
// never passed one counts nothing, however long it lasted, so a plugin
// that fails every probe exhausts its budget whatever the probe interval.
type RestartPolicy struct {
	Base       time.Duration `yaml:"base"`
	Max        time.Duration `yaml:"max"`
	Budget     int           `yaml:"budget"`
	ResetAfter time.Duration `yaml:"reset_after"`
}

func (r RestartPolicy) withDefaults() RestartPolicy {
	if r.Base <= 0 {
		r.Base = DefaultRestartBase
	}
	if r.Max <= 0 {
		r.Max = DefaultRestartMax
	}
	if r.Budget <= 0 {
		r.Budget = DefaultRestartBudget
	}
	if r.ResetAfter <= 0 {
		r.ResetAfter = DefaultRestartResetAfter
	}
	return r
}

func (o Options) withDefaults() Options {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Restart = o.Restart.withDefaults()
	if o.Log == nil {
		o.Log = discardLogger()
	}
	return o
}

// ErrProbeFailed: a health probe got no valid answer; the plugin is
// restarted.
var ErrProbeFailed = errors.New("health probe failed")

// entry is one registered plugin and its supervision state.
type entry struct {
	name   string
	kind   Kind
	launch Launcher
	calls  sync.WaitGroup

	mu          sync.Mutex
	backoff     supervise.Backoff
	state       State
	cold        bool // starting because a call woke a stopped plugin
	rt          Runtime
	restarts    int
	lastFailure string
	lastStderr  []string
	health      string
	healthyAt   time.Time // when the running process last passed a probe
	since       time.Time
	retryAt     time.Time
	changed     chan struct{} // closed and replaced on every state change
	wake        chan struct{}
	// quarantine, when set, refuses every call (Host.Quarantine).
	quarantine *quarantine
	// tools are what the last running process listed (Host.Tools);
	// feed is told of every state change.
	tools []Tool
	feed  *changeFeed
}

func newEntry(name string, kind Kind, launch Launcher, r RestartPolicy) *entry {
	return &entry{name: name, kind: kind, launch: launch, state: StateStarting, health: "unknown", since: time.Now(),
		changed: make(chan struct{}), wake: make(chan struct{}, 1),
		backoff: supervise.Backoff{Base: r.Base, Max: r.Max, Budget: r.Budget, ResetAfter: r.ResetAfter}}
}

func (e *entry) status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Status{Name: e.name, Kind: e.kind, State: e.state, Restarts: e.restarts, LastFailure: e.lastFailure,
		LastStderr: e.lastStderr, Health: e.health, Since: e.since}
	if q := e.quarantine; q != nil {
		s.Quarantined = &QuarantineStatus{Invocation: q.Invocation, Kinds: q.Kinds, At: q.At}
	}
	if e.rt != nil && e.state == StateRunning {
		s.Protocol, s.Pid, s.Sandbox = e.rt.Protocol(), e.rt.Pid(), e.rt.Sandbox()
	}
	if e.state == StateRestarting {
		s.RetryAt = e.retryAt
	}
	return s
}

// setLocked changes the state and wakes everyone waiting for a change.
// Health is a running plugin's: any other state has none to show.
func (e *entry) setLocked(s State) {
	e.state, e.since = s, time.Now()
	if s != StateRunning {
		e.health = "unknown"
	}
	close(e.changed)
	e.changed = make(chan struct{})
	e.feed.notify()
}

func (e *entry) set(s State, mutate func(e *entry)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if mutate != nil {
		mutate(e)
	}
	e.setLocked(s)
}

// acquire returns the runtime to call, waiting while a stopped plugin
// starts cold; otherwise a refusal naming the state.
func (e *entry) acquire(ctx context.Context) (Runtime, error) {
	for {
		e.mu.Lock()
		state, ch := e.state, e.changed
		if e.quarantine != nil {
			e.mu.Unlock()
			return nil, ErrPluginQuarantined
		}
		switch {
		case state == StateRunning && e.health == "not_serving":
			e.mu.Unlock()
			return nil, ErrNotServing
		case state == StateRunning:
			rt := e.rt
			e.mu.Unlock()
			return rt, nil
		case state == StateStopped:
			select {
			case e.wake <- struct{}{}:
			default:
			}
		case state == StateStarting && e.cold:
		case state == StateStarting, state == StateRestarting:
			retry := max(time.Until(e.retryAt), time.Second)
			e.mu.Unlock()
			return nil, &RestartingError{RetryAfter: retry}
		case state == StateFailed:
			reason := e.lastFailure
			e.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", ErrPluginFailed, reason)
		default:
			e.mu.Unlock()
			return nil, ErrHostShutdown
		}
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// why a running plugin stopped being watched.
type why int

const (
	whyExited why = iota
	whyUnhealthy
	whyShutdown
)

// supervise is the one supervisor of both kinds: launch, watch (exit,
// health), restart with backoff, or retire. first receives the result of
// the first launch.
func (h *Host) supervise(e *entry, first chan<- error) {
	report := func(err error) {
		if first != nil {
			first <- err
			first = nil
		}
	}
	log := h.opts.Log.With("plugin", e.name, "kind", string(e.kind))
	for {
		rt, err := e.launch(h.ctx)
		if err != nil {
			if h.ctx.Err() != nil {
				e.set(StateShutdown, nil)
				report(ErrHostShutdown)
				return
			}
			reason := err.Error()
			log.Warn("plugin failed to start", "reason", reason)
			e.mu.Lock()
			e.lastFailure, e.lastStderr = reason, stderrOf(err)
			e.mu.Unlock()
			// The state says failed or restarting before Add returns.
			delay, retry := h.failed(e, isPermanent(err), log)
			report(err)
			if !retry || !h.await(e, delay) {
				return
			}
			// A relaunch after a failed launch is a restart like one after
			// a crash.
			h.metrics.restarts.WithLabelValues(e.name, string(e.kind)).Inc()
			e.mu.Lock()
			e.restarts++
			e.mu.Unlock()
			continue
		}
		started := h.opts.Now()
		e.set(StateRunning, func(e *entry) { e.rt, e.cold, e.health, e.healthyAt = rt, false, "ok", time.Time{} })
		report(nil)
		h.metrics.setUp(e, true)
		h.metrics.setSandbox(e, rt)
		w := h.watch(e, rt)
		h.metrics.setUp(e, false)
		h.metrics.setSandbox(e, nil)
		if w == whyShutdown {
			// One grace for the calls in flight to end (they are
			// cancelled) and for the plugin to stop: the runtime kills it
			// at the deadline, however long the calls took.
			ctx, cancel := context.WithTimeout(context.Background(), h.opts.ShutdownGrace)
			waitCtx(ctx, &e.calls)
			if err := rt.Shutdown(ctx); err != nil {
				log.Error("plugin shutdown", "err", err)
			}
			cancel()
			e.set(StateShutdown, func(e *entry) { e.rt = nil })
			return
		}
		uptime := h.opts.Now().Sub(started)
		e.mu.Lock()
		e.backoff.Ran(healthyUptime(started, e.healthyAt))
		e.mu.Unlock()
		fault := rt.Fault()
		if w == whyUnhealthy {
			rt.Kill()
			fault = ErrProbeFailed
		}
		// Kill returns before the process is gone; what the host opened
		// for it is freed once it is. Its handles and pass were revoked
		// by the exit itself (the launch layer owns that).
		select {
		case <-rt.Exited():
		case <-h.ctx.Done():
		}
		rt.Release()
		if fault == nil {
			// An Executa plugin that ended cleanly: it starts cold on the
			// next call (the lifecycle's Stopped state).
			h.opts.Record(e.name, "lifecycle.exit", "", map[string]any{"kind": string(e.kind), "uptime_ms": uptime.Milliseconds()})
			log.Info("plugin exited cleanly; it starts again on the next call")
			e.set(StateStopped, func(e *entry) { e.rt = nil })
			select {
			case <-e.wake:
				e.set(StateStarting, func(e *entry) { e.cold = true })
				continue
			case <-h.ctx.Done():
				e.set(StateShutdown, nil)
				return
			}
		}
		reason := fault.Error()
		h.opts.Record(e.name, "lifecycle.crash", "", map[string]any{"kind": string(e.kind), "uptime_ms": uptime.Milliseconds(),
			"reason": reason})
		h.metrics.restarts.WithLabelValues(e.name, string(e.kind)).Inc()
		log.Warn("plugin crashed", "reason", reason, "uptime", uptime.Round(time.Millisecond))
		e.mu.Lock()
		e.restarts++
		e.lastFailure, e.lastStderr, e.rt = reason, stderrOf(fault), nil
		e.mu.Unlock()
		if delay, retry := h.failed(e, false, log); !retry || !h.await(e, delay) {
			return
		}
	}
}

// failed records a failure: the plugin is marked failed (a permanent
// failure, or the restart budget spent; retry false) or restarting after
// delay.
func (h *Host) failed(e *entry, permanent bool, log interface{ Warn(string, ...any) }) (delay time.Duration, retry bool) {
	e.mu.Lock()
	ok := e.backoff.Fail() && !permanent
	delay = e.backoff.Delay()
	e.mu.Unlock()
	if !ok {
		e.set(StateFailed, func(e *entry) {
			if !permanent {
				e.lastFailure += fmt.Sprintf(" (restart budget of %d exhausted)", e.backoff.Budget)
			}
		})
		log.Warn("plugin marked failed; the host keeps serving the others")
		return 0, false
	}
	e.set(StateRestarting, func(e *entry) { e.retryAt = time.Now().Add(delay) })
	return delay, true
}

// await waits out a restart delay; false when the host shuts down first.
func (h *Host) await(e *entry, delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		e.set(StateStarting, nil)
		return true
	case <-h.ctx.Done():
		e.set(StateShutdown, nil)
		return false
	}
}

// watch waits until the runtime exits, fails a health probe, or the host
// shuts down. A probe the plugin answers with "not serving" refuses calls
// until a later probe says it serves again.
func (h *Host) watch(e *entry, rt Runtime) why {
	tick := time.NewTicker(h.opts.HealthInterval)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return whyShutdown
		case <-rt.Exited():
			return whyExited
		case <-tick.C:
			ctx, cancel := context.WithTimeout(h.ctx, DefaultHealthTimeout)
			err := rt.Health(ctx)
			cancel()
			if h.ctx.Err() != nil {
				return whyShutdown
			}
			health := "ok"
			switch {
			case err == nil:
			case errors.Is(err, ErrNotServing) && !errors.Is(err, ErrProbeFailed):
				health = "not_serving"
			default:
				select {
				case <-rt.Exited():
					return whyExited
				default:
				}
				h.opts.Log.Warn("plugin failed a health probe; restarting it", "plugin", e.name, "kind", string(e.kind), "err", err)
				return whyUnhealthy
			}
			e.mu.Lock()
			e.health = health
			if health == "ok" {
				e.healthyAt = h.opts.Now()
			}
			e.mu.Unlock()
		}
	}
}

// stderrOf is the stderr tail an exit error carries (none: nil).
func stderrOf(err error) []string {
	var x *supervise.ExitError
	if errors.As(err, &x) {
		return x.Stderr
	}
	return nil
}

// healthyUptime is how long a run counts towards resetting the restart
// budget: from its start to the last probe it passed (none: nothing).
func healthyUptime(started, healthyAt time.Time) time.Duration {
	if healthyAt.Before(started) {
		return 0
	}
	return healthyAt.Sub(started)
}

// isPermanent: failures a restart cannot fix (the installed package or
// manifest no longer matches, a manifest that does not validate); the
// plugin is marked failed at once.
func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p) || errors.Is(err, ErrManifestInvalid)
}

// Permanent marks a launch failure that a restart cannot fix (a binary
// that no longer has its installed digest, a provider whose manifest
// changed), so the supervisor marks the plugin failed at once instead of
// spending its restart budget. The error's text and chain are err's.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// ErrManifestInvalid: a plugin's manifest does not validate.
var ErrManifestInvalid = errors.New("plugin manifest is not valid")
