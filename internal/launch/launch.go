// Package launch is the one place that starts a plugin process, of either
// kind: its private directory, environment, intercept CA copy and proxy
// pass, its sandbox and limits, its supervision, and — after every exit,
// whatever the cause — the revocation of every handle the plugin holds
// and of its pass, and the end of its relays. The runtimes (plugin/v1,
// Executa) only speak their protocol over the pipes and sockets of the
// Runner that Start returns, and see the process through it alone.
//
// # Security
//
// A plugin's environment holds the protocol's variables, what its config
// sets, and the egress variables this package owns (Owned); nothing else
// of the host's. The sandbox level comes from the operator's config; off
// is warned about at every launch.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/egressenv"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/supervise"
)

// Owned are the variables the launch layer sets; a plugin's configured
// environment cannot set them.
var Owned = slices.Concat([]string{"TMPDIR", "NO_PROXY", "no_proxy"}, egressenv.Names)

// Options are the host-wide parts of every launch.
type Options struct {
	Broker broker.API
	// EgressProxy is the proxy (host:port) the plugin's HTTP_PROXY leads
	// to; InterceptCAFile its intercept CA certificate (HTTPS_PROXY, the
	// CA variables and a pass when set).
	EgressProxy     string
	InterceptCAFile string
	// Sandbox is the host.sandbox config.
	Sandbox sandbox.Config
	// ProxyServe, when set, hands the egress proxy a sandboxed plugin's
	// proxy listener to serve directly (no relay hop) for that plugin
	// (Request.Plugin), so that the proxy refuses any other plugin's
	// handle or pass on it: the proxy of this process (airlock dev) or of
	// the airlock serve beside the host (handoff).
	ProxyServe func(plugin string, l net.Listener) (io.Closer, error)
	// Hide are Airlock's own paths (state directory, config, runtime
	// directories) a plugin never sees.
	Hide        []string
	StderrLevel slog.Level
	Redactor    *redact.Redactor
	Log         *slog.Logger
}

// Request is one plugin process to start.
type Request struct {
	Plugin string
	Path   string
	Args   []string
	// Env is the protocol's variables and the plugin's configured
	// environment (Owned names are dropped).
	Env []string
	// InstallDir is shown read-only ("" none).
	InstallDir string
	// NoHTTPS: the plugin opted out of interception (HTTP_PROXY only).
	NoHTTPS bool
	// PassDests (or, when empty, PassIntents) are what the plugin's pass
	// covers; no pass when both are empty.
	PassDests   []broker.Destination
	PassIntents []string
	// Sockets are host directories of unix sockets the plugin dials.
	Sockets []string
	// Direct are host:port endpoints the plugin reaches without the proxy
	// (the Executa files endpoint): NO_PROXY names their hosts.
	Direct []string
	// Stdin: the plugin reads frames on stdin (Executa).
	Stdin bool
	// Dirs are host directories of this process (its sockets), removed
	// after its exit.
	Dirs []string
}

// process is a started local plugin process: the Runner Start returns.
type process struct {
	*supervise.Proc
	dir    string
	level  sandbox.Level
	uid    int
	stdin  io.WriteCloser
	stdout io.ReadCloser
	creds  *credentials

	keeper egressenv.Keeper
}

// ErrLimit: the sandbox killed the plugin for reaching a limit.
var ErrLimit = errors.New("the plugin reached a sandbox limit")

// PassErr renews the pass first (egressenv.Keeper.Verify).
func (p *process) PassErr(ctx context.Context) error { return p.keeper.Verify(ctx) }

// Start starts req. On error nothing is left running and the private
// directory is gone. From its start the process owns its credentials:
// after every exit its handles and its pass are revoked before Exited
// closes.
func Start(ctx context.Context, req Request, o Options) (_ Runner, err error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	want, ro, limits := o.Sandbox.For(req.Plugin)
	level, err := sandbox.Resolve(want)
	if err != nil {
		return nil, err
	}
	if level == sandbox.LevelOff {
		log.Warn("this plugin runs WITHOUT a sandbox (host.sandbox.level: off): it can read what the host can and reach any address")
	}
	dir, err := MkdirPrivate("airlock-plugin-")
	if err != nil {
		return nil, err
	}
	warnNoSession(log)
	creds := &credentials{broker: o.Broker, plugin: req.Plugin, log: log}
	p := &process{dir: dir, level: level, creds: creds}
	pass := broker.Issued{}
	owned := true // the directory and pass are ours to clean up on error
	defer func() {
		if err != nil && owned {
			os.RemoveAll(dir)
			creds.revokePass()
		}
	}()
	var caFile string
	if o.EgressProxy != "" && o.InterceptCAFile != "" && !req.NoHTTPS {
		if caFile, err = egressenv.InstallCA(o.InterceptCAFile, dir); err != nil {
			return nil, fmt.Errorf("installing the intercept CA certificate for the plugin: %w", err)
		}
		if o.Broker != nil && (len(req.PassDests) > 0 || len(req.PassIntents) > 0) {
			if pass, creds.passInv, err = egressenv.Pass(ctx, o.Broker, req.Plugin, req.PassDests, req.PassIntents, log); err != nil {
				return nil, err
			}
		}
	}
	var relays []sandbox.Relay
	if o.EgressProxy != "" {
		r := sandbox.Relay{Target: o.EgressProxy}
		if serve := o.ProxyServe; serve != nil {
			r.Serve = func(l net.Listener) (io.Closer, error) { return serve(req.Plugin, l) }
		}
		relays = append(relays, r)
	}
	for _, d := range req.Direct {
		relays = append(relays, sandbox.Relay{Target: d})
	}
	if relays, err = sandbox.Listen(level, relays); err != nil {
		return nil, err
	}
	boxed := false // the box owns the plugin's own listeners once made
	defer func() {
		if !boxed {
			sandbox.CloseOwn(relays)
		}
	}()
	proxy := ""
	var direct []string
	for i, r := range relays {
		if i == 0 && o.EgressProxy != "" {
			proxy = r.PluginAddr(level)
			continue
		}
		direct = append(direct, r.PluginAddr(level))
	}
	env := slices.DeleteFunc(slices.Clone(req.Env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(Owned, k)
	})
	env = append(env, egressenv.Vars(proxy, caFile, pass.Handle)...)
	if np := NoProxy(direct...); np != "" {
		env = append(env, "NO_PROXY="+np, "no_proxy="+np)
	}
	env = append(env, "TMPDIR="+dir)
	// A root host runs each plugin as a uid of its own: what the plugin
	// must connect to is handed to that uid alone.
	uid, ownUID, err := o.Sandbox.PluginUID(req.Plugin, level)
	if err != nil {
		return nil, err
	}
	if ownUID {
		p.uid = uid
		for _, s := range req.Sockets {
			if err := chownTree(s, uid); err != nil {
				return nil, fmt.Errorf("handing the plugin its sockets: %w", err)
			}
		}
	}
	spec := sandbox.Spec{Name: req.Plugin, Path: req.Path, Args: req.Args, Env: env, Dir: dir,
		InstallDir: req.InstallDir, ReadOnly: ro, Sockets: req.Sockets, Hide: o.Hide, Relays: relays, Limits: limits, UID: uid}
	cmd, box, err := sandbox.Command(spec, level, log)
	if err != nil {
		return nil, err
	}
	boxed = true
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = stdoutW
	closers := []io.Closer{stdoutW}
	if req.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			stdout.Close()
			stdoutW.Close()
			return nil, err
		}
		cmd.Stdin, p.stdin = r, w
		closers = append(closers, r)
	}
	popts := supervise.ProcOptions{Dirs: append([]string{dir}, req.Dirs...), CloseAfterStart: closers,
		Stderr: supervise.NewLineLog(log, o.StderrLevel, o.Redactor),
		AfterExit: func(exitErr error) error {
			e := box.Wait()
			creds.ended()
			if e.Limit != "" {
				log.Error("the sandbox killed the plugin: it reached a limit", "limit", e.Limit, "detail", e.Detail)
				return fmt.Errorf("%w (%s): %s", ErrLimit, e.Limit, e.Detail)
			}
			return exitErr
		}}
	if level != sandbox.LevelOff {
		popts.Kill = sandbox.Kill
	}
	proc, err := supervise.Start(cmd, popts)
	if err != nil {
		stdout.Close()
		if p.stdin != nil {
			p.stdin.Close()
		}
		box.Wait()
		return nil, fmt.Errorf("start %s: %w", req.Plugin, err)
	}
	// From here the directory and the pass die with the process.
	p.Proc, p.stdout = proc, stdout
	owned = false
	if err := box.Start(ctx); err != nil {
		proc.Kill()
		stdout.Close()
		return nil, err
	}
	p.keeper.Keep(proc.Exited(), o.Broker, req.Plugin, pass, log)
	attrs := []any{"sandbox", string(level), "pid", proc.Pid()}
	if ownUID {
		attrs = append(attrs, "uid", uid)
	}
	log.Info("plugin started", attrs...)
	return p, nil
}

// NoProxy is the NO_PROXY value for endpoints (host:port) a plugin
// reaches directly: their hosts without the ports, which curl and Python
// requests ignore an entry for.
func NoProxy(addrs ...string) string {
	var hosts []string
	for _, a := range addrs {
		if h, _, err := net.SplitHostPort(a); err == nil && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ",")
}

// chownTree hands dir and what it holds to uid.
func chownTree(dir string, uid int) error {
	if err := os.Chown(dir, uid, uid); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Lchown(dir+"/"+e.Name(), uid, uid); err != nil {
			return err
		}
	}
	return nil
}
