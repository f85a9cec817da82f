package executa

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/supervise"
)

// Health words the published SDKs answer with, mapped to what they mean.
// Anything else is unhealthy (and never echoed).
var healthWords = map[string]error{
	"ready": nil, "healthy": nil, "ok": nil, "up": nil, "serving": nil, "running": nil, "pass": nil, "green": nil,
	"initializing": ErrNotReady, "starting": ErrNotReady, "not_ready": ErrNotReady, "degraded": ErrNotReady,
}

// Health asks the plugin. -32601 (no health method) means healthy; the
// status words of the lifecycle page and of the SDKs are accepted (see
// healthWords, case-insensitive); "initializing" and the like are
// ErrNotReady; anything else, or no answer, is ErrUnhealthy.
func (p *Process) Health(ctx context.Context) error {
	if err := p.proc.PassErr(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrUnhealthy, err)
	}
	m, err := p.call(ctx, "health", map[string]any{}, p.opts.Timeouts.Health)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnhealthy, err)
	}
	if m.Error != nil {
		if m.Error.Code == CodeMethodNotFound {
			return nil
		}
		return fmt.Errorf("%w: health answered with error code %d", ErrUnhealthy, m.Error.Code)
	}
	var res struct {
		Status  string `json:"status"`
		Healthy *bool  `json:"healthy"`
	}
	if json.Unmarshal(m.Result, &res) != nil {
		return fmt.Errorf("%w: health result is not an object", ErrUnhealthy)
	}
	if res.Status == "" && res.Healthy != nil {
		if *res.Healthy {
			return nil
		}
		return fmt.Errorf("%w: health says healthy: false", ErrUnhealthy)
	}
	verdict, known := healthWords[strings.ToLower(strings.TrimSpace(res.Status))]
	if !known {
		return fmt.Errorf("%w: health status is not one the host knows", ErrUnhealthy)
	}
	return verdict
}

// Exited is closed when the process has exited, its process group is
// dead and its private directory removed.
func (p *Process) Exited() <-chan struct{} { return p.proc.Exited() }

// Sandbox is the sandbox level the plugin runs at.
func (p *Process) Sandbox() string { return string(p.proc.Level()) }

// Pid is the plugin's process id.
func (p *Process) Pid() int { return p.proc.Pid() }

// Fault explains an exit the host did not ask for: nil for an exit with
// status 0 (the plugin starts cold on the next call; if it answered
// almost nothing, the lifecycle's pitfall #1 is logged), an error for a
// non-zero exit or a signal.
func (p *Process) Fault() error {
	p.mu.Lock()
	closing, answers := p.closing, p.answers
	p.mu.Unlock()
	err := p.proc.Err()
	switch {
	case closing:
		return nil
	case err == nil:
		if answers <= 3 {
			p.log.Warn(ErrExitedEarly.Error())
		}
		return nil
	default:
		return fmt.Errorf("%w: %v", ErrPluginExited, err)
	}
}

// Shutdown revokes the plugin's handles and pass (the launch layer's
// Revoke: before the plugin is told), then follows the contract: close
// stdin, wait StdinGrace, SIGTERM the process group, wait TermGrace,
// SIGKILL. It returns the revocation's failure, if any; the plugin is
// stopped whatever it is.
func (p *Process) Shutdown() error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	err := p.proc.Revoke(context.Background())
	_ = p.stdin.Close()
	p.proc.Stop(
		supervise.Step{Wait: p.opts.Timeouts.StdinGrace, Signal: syscall.SIGTERM},
		supervise.Step{Wait: p.opts.Timeouts.TermGrace, Signal: syscall.SIGKILL})
	return err
}

// Kill ends the process group at once.
func (p *Process) Kill() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.proc.Kill()
}

func (p *Process) kill() { p.Kill() }
