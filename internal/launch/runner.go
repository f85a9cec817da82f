package launch

import (
	"context"
	"io"
	"syscall"

	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/supervise"
)

// Runner is a started plugin process as the runtimes see it, in the
// shape of go-plugin's runner.Runner: wait for the exit, kill, the pipes,
// the pid, and what Airlock adds (the sandbox level, the plugin's uid,
// its private directory, its pass and the revocation of its
// credentials). Start returns one for a local supervised process; a
// container runner or a test's fake can stand in, since the runtimes
// use nothing else.
type Runner interface {
	// Exited is closed once the process has exited, its group is dead,
	// its handles and pass are revoked and its directories are removed
	// (go-plugin's Wait).
	Exited() <-chan struct{}
	// Err is the exit error (nil for status 0); valid after Exited closes.
	Err() error
	// ExitErr is Err for a report: an exit with status 0 too carries the
	// stderr tail (a *supervise.ExitError).
	ExitErr() error
	// Kill ends the process (its whole sandbox) and waits for the exit.
	Kill()
	// Signal sends sig to the process group.
	Signal(sig syscall.Signal)
	// Stop waits for the exit, escalating through steps; it returns how
	// many signals were sent.
	Stop(steps ...supervise.Step) int
	// Stdin is the plugin's stdin (nil unless Request.Stdin); Stdout its
	// stdout, for the runtime to read to the end. Stderr is read here, a
	// line at a time, into the log.
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	Pid() int
	// Level is the sandbox level the plugin got.
	Level() sandbox.Level
	// UID is the plugin's own uid and gid (a root host gives every
	// plugin one: SO_PEERCRED of its connections names it); 0 when it
	// runs as the host's uid.
	UID() int
	// Dir is the private directory (TMPDIR); removed after the exit.
	Dir() string
	// PassErr is nil while the plugin's pass is kept (or it has none).
	// For a health probe it renews the pass first, so a revoked pass
	// fails the next probe.
	PassErr(ctx context.Context) error
	// Revoke revokes every handle of the plugin and its pass now: a
	// runtime's Shutdown calls it before it tells the plugin to stop.
	// The exit revokes them again, whatever its cause.
	Revoke(ctx context.Context) error
}

var _ Runner = (*process)(nil)

func (p *process) Stdin() io.WriteCloser            { return p.stdin }
func (p *process) Stdout() io.ReadCloser            { return p.stdout }
func (p *process) Level() sandbox.Level             { return p.level }
func (p *process) UID() int                         { return p.uid }
func (p *process) Dir() string                      { return p.dir }
func (p *process) Revoke(ctx context.Context) error { return p.creds.revoke(ctx) }
