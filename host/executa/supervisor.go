package executa

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/supervise"
)

// Restart rules of the lifecycle page.
const (
	MaxRestarts      = 3
	RestartBaseDelay = time.Second
)

// State of a supervised plugin.
type State string

// States.
const (
	StateRunning State = "running"
	StateStopped State = "stopped" // exited after one response (pitfall #1): restarts on the next call
	StateFailed  State = "failed"  // crashed more times than the restart budget allows
)

// ErrRestartBudget: the plugin crashed more than MaxRestarts times.
var ErrRestartBudget = errors.New("plugin crashed more times than the restart budget allows")

// Supervisor owns one plugin process: it starts it on demand, restarts it
// after a crash with exponential backoff (at most 3 attempts, base 1 s;
// non-zero exits count against the budget), and marks a plugin that exits
// after a single response Stopped with the reason, starting it cold on
// the next call.
type Supervisor struct {
	cfg  PluginConfig
	opts Options
	// BaseDelay overrides RestartBaseDelay (tests).
	BaseDelay time.Duration

	mu      sync.Mutex
	proc    *Process
	state   State
	reason  error
	backoff supervise.Backoff // Budget MaxRestarts; Base is BaseDelay
}

// NewSupervisor returns a supervisor; nothing starts until the first call.
func NewSupervisor(cfg PluginConfig, opts Options) *Supervisor {
	return &Supervisor{cfg: cfg, opts: opts, BaseDelay: RestartBaseDelay, backoff: supervise.Backoff{Budget: MaxRestarts}}
}

// State reports the plugin's state and, when not running, why.
func (s *Supervisor) State() (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeLocked()
	return s.state, s.reason
}

// observeLocked notices an exit of the current process.
func (s *Supervisor) observeLocked() {
	if s.proc == nil {
		return
	}
	select {
	case <-s.proc.Exited():
	default:
		return
	}
	reason := s.proc.ExitReason()
	s.proc = nil
	if reason == nil {
		return
	}
	s.reason = reason
	if errors.Is(reason, ErrExitedEarly) {
		s.state = StateStopped
		return
	}
	if !s.backoff.Fail() {
		s.state = StateFailed
	}
}

// Process returns the running process, starting it if needed.
func (s *Supervisor) Process(ctx context.Context) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeLocked()
	if s.state == StateFailed {
		return nil, fmt.Errorf("%w: %v", ErrRestartBudget, s.reason)
	}
	if s.proc != nil {
		return s.proc, nil
	}
	s.backoff.Base = s.BaseDelay
	if delay := s.backoff.Delay(); delay > 0 && s.state != StateStopped {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cfg := s.cfg
	cfg.FirstRun = s.state == ""
	p, err := Start(ctx, cfg, s.opts)
	if err != nil {
		s.reason = err
		if !s.backoff.Fail() {
			s.state = StateFailed
		}
		return nil, err
	}
	s.proc, s.state = p, StateRunning
	return p, nil
}

// Invoke runs a tool on the supervised plugin.
func (s *Supervisor) Invoke(ctx context.Context, req InvokeRequest) (*InvokeResult, error) {
	p, err := s.Process(ctx)
	if err != nil {
		return nil, err
	}
	return p.Invoke(ctx, req)
}

// Shutdown stops the plugin.
func (s *Supervisor) Shutdown() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Shutdown()
	}
}
