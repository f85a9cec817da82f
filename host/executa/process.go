package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/tokens"
)

// Protocol versions.
const (
	ProtocolV2  = "2.0"
	ProtocolV11 = "1.1"
)

// Process is one running Executa plugin.
type Process struct {
	cfg    PluginConfig
	opts   Options
	proc   launch.Runner
	stdin  io.WriteCloser
	tmpdir string
	log    *slog.Logger

	writeMu sync.Mutex
	mu      sync.Mutex
	pending map[string]chan *Message
	nextID  int64
	invokes map[string]*liveInvoke
	answers int
	closing bool

	progress *progressLog

	Protocol     string                     // negotiated: "2.0" or "1.1"
	Capabilities map[string]json.RawMessage // what the plugin said it uses (v2)
	ServerInfo   json.RawMessage
	Manifest     *Manifest
}

type liveInvoke struct {
	// ctx ends with the invoke: reverse calls made for it (sampling,
	// storage) are cancelled when it ends.
	ctx           context.Context
	id            string
	binding       tokens.Binding
	samplingToken string
	storageToken  string
	budget        samplingBudget
	// spend, when set, checks (tokens 0) or charges the host's budgets
	// of the invoke with sampling tokens.
	spend func(ctx context.Context, tokens int64) error
	// progress, when set, forwards the invoke's progress events to
	// its caller.
	progress *progressSink
}

// Start spawns the plugin, negotiates the protocol and reads its manifest.
func Start(ctx context.Context, cfg PluginConfig, opts Options) (*Process, error) {
	opts.Timeouts = opts.Timeouts.withDefaults()
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxTokensPerCall == 0 {
		opts.MaxTokensPerCall = 8192
	}
	if opts.MaxCallsPerInvoke == 0 {
		opts.MaxCallsPerInvoke = 8
	}
	p := &Process{cfg: cfg, opts: opts, pending: map[string]chan *Message{}, invokes: map[string]*liveInvoke{},
		progress: newProgressLog(), log: opts.Log.With("plugin", cfg.Name, "kind", "executa")}
	path, err := exec.LookPath(cfg.Command)
	if err != nil {
		return nil, fmt.Errorf("spawn %s: the command is not an executable file", cfg.Name)
	}
	if cfg.InheritAllEnv {
		p.log.Warn("inherit_all_env: this plugin gets the host's whole environment minus a deny list; any API key in the host's environment reaches it")
	}
	intents := slices.Compact(slices.Sorted(maps.Values(cfg.Credentials)))
	proc, err := launch.Start(ctx, launch.Request{Plugin: cfg.Name, Path: path, Args: cfg.Args, InstallDir: installDir(path, cfg.Args),
		Env:     pluginEnv(os.Environ(), envSpec{set: cfg.Env, inherit: cfg.InheritEnv, inheritAll: cfg.InheritAllEnv, deny: cfg.EnvDeny}),
		NoHTTPS: opts.NoHTTPSProxy, PassIntents: intents, Direct: opts.Files.DirectHosts(), Stdin: true,
	}, launch.Options{Broker: opts.Broker, EgressProxy: opts.EgressProxy, InterceptCAFile: opts.InterceptCAFile,
		Sandbox: opts.Sandbox, Hide: opts.Hide, ProxyServe: opts.ProxyServe, StderrLevel: opts.StderrLevel, Redactor: opts.Redactor, Log: p.log})
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", cfg.Name, err)
	}
	p.proc, p.tmpdir, p.stdin = proc, proc.Dir(), proc.Stdin()
	stdout := proc.Stdout()
	go p.readLoop(stdout)
	go func() {
		<-proc.Exited()
		p.mu.Lock()
		for id, ch := range p.pending {
			close(ch)
			delete(p.pending, id)
		}
		p.mu.Unlock()
	}()
	if err := p.initialize(ctx); err != nil {
		p.kill()
		return nil, err
	}
	if err := p.describe(ctx); err != nil {
		p.kill()
		return nil, err
	}
	p.checkBindings()
	return p, nil
}

func (p *Process) readLoop(stdout io.ReadCloser) {
	defer stdout.Close()
	fr := NewFrameReader(stdout)
	seenFrame := false
	for {
		m, err := fr.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			var big *FrameTooLargeError
			if errors.As(err, &big) && big.ID != nil {
				// End the call it answered now, not at its deadline.
				p.log.Warn("protocol error from plugin: a response frame over 2 MiB; the call it answers fails", "err", err)
				p.deliver(&Message{ID: big.ID, Error: frameTooLargeRefused})
				continue
			}
			if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrNotJSON) || errors.Is(err, ErrNotJSONRPC) {
				if !seenFrame && errors.Is(err, ErrNotJSON) {
					p.log.Warn("stdout noise before the first frame: stdout carries frames only, log to stderr", "err", err)
				} else {
					p.log.Warn("protocol error from plugin; frame dropped", "err", err)
				}
				continue
			}
			return
		}
		seenFrame = true
		switch {
		case m.IsResponse():
			p.deliver(m)
		case len(m.ID) > 0:
			go p.reverse(m)
		default:
			p.notification(m)
		}
	}
}

func (p *Process) deliver(m *Message) {
	key := string(m.ID)
	p.mu.Lock()
	ch, ok := p.pending[key]
	delete(p.pending, key)
	p.answers++
	p.mu.Unlock()
	if !ok {
		p.log.Warn("response to no request in flight; dropped")
		return
	}
	if m.FileTransport != "" {
		m = p.fileTransport(m)
	}
	ch <- m
}

// fileTransport replaces a response announced through a temporary file.
// The SDKs use it whenever an answer is large, whether or not the session
// negotiated fileTransport (1.1 sessions included), so the host accepts
// it in every session; what stays strict is where the file may be: only
// inside the plugin's own private temp directory, symbolic links
// resolved. The file is deleted.
func (p *Process) fileTransport(m *Message) *Message {
	bad := &Message{ID: m.ID, Error: fileTransportRefused}
	b, err := readTransportFile(p.tmpdir, m.FileTransport, 256<<20)
	if err != nil {
		return bad
	}
	full, err := ParseFrame(b)
	if err != nil || string(full.ID) != string(m.ID) {
		return bad
	}
	return full
}

// notification keeps an executa/progress event within the limits, and
// passes it on to the caller of the invoke it belongs to.
func (p *Process) notification(m *Message) {
	if m.Method != "executa/progress" {
		return
	}
	e, ok := p.progress.add(m.Params)
	if !ok {
		p.log.Debug("progress event dropped (over 8 KB or 50/s)")
		return
	}
	if inv := p.progressOwner(m.Params); inv != nil && inv.progress != nil && !inv.progress.offer(e) {
		p.log.Debug("progress event not forwarded: its caller is behind")
	}
}

// call sends a request and waits for its response.
func (p *Process) call(ctx context.Context, method string, params any, timeout time.Duration) (*Message, error) {
	p.mu.Lock()
	p.nextID++
	id := strconv.FormatInt(p.nextID, 10)
	ch := make(chan *Message, 1)
	p.pending[id] = ch
	p.mu.Unlock()
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	if err := p.send(&Message{ID: json.RawMessage(id), Method: method, Params: raw}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPluginExited, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m, ok := <-ch:
		if !ok {
			// Closed once the process has exited: its status is known.
			return nil, fmt.Errorf("%w: %w", ErrPluginExited, p.proc.ExitErr())
		}
		return m, nil
	case <-t.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, ErrTimeout
}

func (p *Process) send(m *Message) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return Encode(p.stdin, m)
}

// checkBindings tells the operator, at start, what the config leaves
// undelivered or refuses to deliver. Credentials are named by index: the
// names are the plugin's.
func (p *Process) checkBindings() {
	if err := p.Unbound(); err != nil {
		p.log.Warn("calls will be refused: " + err.Error())
	}
	for i, c := range p.Manifest.Credentials {
		if _, ok := p.cfg.Settings[c.Name]; ok && c.IsSensitive() {
			p.log.Warn("a setting names a credential the manifest does not mark sensitive: false; it is not delivered (bind it to a broker intent)",
				"credential_index", i)
		}
	}
}
