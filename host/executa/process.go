package executa

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/supervise"
	"github.com/airlock-dev/airlock/tokens"
)

// Protocol versions.
const (
	ProtocolV2  = "2.0"
	ProtocolV11 = "1.1"
)

// Timeouts of the lifecycle page, overridable for tests.
type Timeouts struct {
	Initialize      time.Duration // 5 s
	Describe        time.Duration // 5 s
	DescribeOnefile time.Duration // 60 s, first launch of a onefile binary
	Invoke          time.Duration // 60 s unless the tool says
	Health          time.Duration // 3 s
	StdinGrace      time.Duration // 5 s after stdin closes
	TermGrace       time.Duration // 5 s after SIGTERM
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&t.Initialize, 5*time.Second)
	def(&t.Describe, 5*time.Second)
	def(&t.DescribeOnefile, 60*time.Second)
	def(&t.Invoke, 60*time.Second)
	def(&t.Health, 3*time.Second)
	def(&t.StdinGrace, 5*time.Second)
	def(&t.TermGrace, 5*time.Second)
	return t
}

// PluginConfig is one Executa plugin as the security team configured it.
type PluginConfig struct {
	Name    string
	Command string
	Args    []string
	// Strict passes only PATH, HOME, LANG, TMPDIR and the proxy.
	Strict   bool
	EnvDeny  []string
	Onefile  bool
	FirstRun bool // the first launch of this binary (describe gets 60 s when Onefile)
	// Credentials bind declared credential names to broker intents: the
	// plugin receives a handle.
	Credentials map[string]string
	// RawCredentials is the explicit, logged opt-in for plugins that cannot
	// use the proxy: the secret value itself is delivered.
	RawCredentials map[string]string
}

// Secrets reads a configured intent's secret (for the raw opt-in).
type Secrets interface {
	SecretFor(ctx context.Context, intent string, fresh bool) (broker.Secret, error)
}

// Options are the host's services for Executa plugins.
type Options struct {
	Broker  broker.API
	Secrets Secrets
	// Tokens mints sampling and storage tokens: broker.LocalMinter in one
	// process, the broker API client from airlock host.
	Tokens      broker.TokenMinter
	EgressProxy string
	Timeouts    Timeouts
	Log         *slog.Logger
	// Verifier checks the tokens plugins present on reverse RPC.
	Verifier *tokens.Verifier
	// Sampling is the backend of sampling/createMessage; none when nil.
	Sampling SamplingBackend
	// KV is the APS key-value store of storage/*; none when nil.
	KV *KVStore
	// Files serves files/*; none when nil.
	Files *Files
	// SamplingCaps is what the host offers in initialize.
	MaxTokensPerCall, MaxCallsPerInvoke int
}

// Errors.
var (
	ErrStopped      = errors.New("plugin is stopped")
	ErrUnknownTool  = errors.New("tool is not in the plugin's manifest")
	ErrTimeout      = errors.New("plugin did not answer in time")
	ErrPluginExited = errors.New("plugin process exited")
	ErrExitedEarly  = errors.New("plugin exited after one response: it must keep reading stdin until EOF (Executa pitfall #1)")
)

// Process is one running Executa plugin.
type Process struct {
	cfg    PluginConfig
	opts   Options
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	tmpdir string
	log    *slog.Logger

	writeMu sync.Mutex
	mu      sync.Mutex
	pending map[string]chan *Message
	nextID  int64
	invokes map[string]*liveInvoke
	answers int
	exited  chan struct{}
	exitErr error
	closing bool

	progress *progressLog

	Protocol     string                     // negotiated: "2.0" or "1.1"
	Capabilities map[string]json.RawMessage // what the plugin said it uses (v2)
	ServerInfo   json.RawMessage
	Manifest     *Manifest
}

type liveInvoke struct {
	id            string
	binding       tokens.Binding
	samplingToken string
	storageToken  string
	budget        samplingBudget
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
	tmp, err := os.MkdirTemp("", "executa-")
	if err != nil {
		return nil, err
	}
	p := &Process{cfg: cfg, opts: opts, tmpdir: tmp, pending: map[string]chan *Message{}, invokes: map[string]*liveInvoke{},
		progress: newProgressLog(),
		exited:   make(chan struct{}), log: opts.Log.With("plugin", cfg.Name)}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = pluginEnv(os.Environ(), cfg.Strict, cfg.EnvDeny, opts.EgressProxy, tmp)
	cmd.Dir = tmp
	supervise.Prepare(cmd)
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &stderrLog{log: p.log}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("spawn %s: %w", cfg.Name, err)
	}
	p.cmd = cmd
	go p.readLoop(stdout)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		for id, ch := range p.pending {
			close(ch)
			delete(p.pending, id)
		}
		p.mu.Unlock()
		close(p.exited)
	}()
	if err := p.initialize(ctx); err != nil {
		p.kill()
		return nil, err
	}
	if err := p.describe(ctx); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

func (p *Process) readLoop(stdout io.Reader) {
	fr := NewFrameReader(stdout)
	seenFrame := false
	for {
		m, err := fr.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
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

// fileTransport replaces a response announced through a temporary file,
// reading it only if fileTransport was negotiated and the file is in the
// plugin's own temp directory; the file is deleted.
func (p *Process) fileTransport(m *Message) *Message {
	bad := &Message{ID: m.ID, Error: &RPCError{Code: CodeInternalError, Message: "file transport refused"}}
	if _, ok := p.Capabilities["fileTransport"]; !ok && p.Protocol == ProtocolV2 {
		// The host offers fileTransport; the plugin must have echoed it.
		return bad
	}
	if p.Protocol != ProtocolV2 {
		return bad
	}
	path, err := filepath.EvalSymlinks(m.FileTransport)
	dir, derr := filepath.EvalSymlinks(p.tmpdir)
	if err != nil || derr != nil || !strings.HasPrefix(path, dir+string(os.PathSeparator)) {
		return bad
	}
	defer os.Remove(path)
	f, err := os.Open(path)
	if err != nil {
		return bad
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256<<20))
	if err != nil {
		return bad
	}
	full, err := ParseFrame(b)
	if err != nil || string(full.ID) != string(m.ID) {
		return bad
	}
	return full
}

func (p *Process) notification(m *Message) {
	if m.Method == "executa/progress" && !p.progress.add(m.Params) {
		p.log.Debug("progress event dropped (over 8 KB or 50/s)")
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
			return nil, ErrPluginExited
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

func (p *Process) initialize(ctx context.Context) error {
	params := map[string]any{
		"protocolVersion": ProtocolV2,
		"clientInfo":      map[string]string{"name": "airlock", "version": "1.0"},
		"capabilities": map[string]any{
			"sampling": map[string]any{"modalities": []string{"text"}, "maxTokensPerCall": p.opts.MaxTokensPerCall,
				"maxCallsPerInvoke": p.opts.MaxCallsPerInvoke, "responseFormat": []string{"json_object", "json_schema"}},
			"fileTransport": true,
		},
	}
	m, err := p.call(ctx, "initialize", params, p.opts.Timeouts.Initialize)
	if errors.Is(err, ErrPluginExited) {
		return err
	}
	// Timeout, -32601 or any other error frame: silently protocol 1.1.
	p.Protocol = ProtocolV11
	if err != nil || m.Error != nil {
		return nil
	}
	var res struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage            `json:"server_info"`
		ServerInfoCamel json.RawMessage            `json:"serverInfo"`
	}
	if json.Unmarshal(m.Result, &res) != nil || res.ProtocolVersion != ProtocolV2 {
		return nil
	}
	p.Protocol, p.Capabilities = ProtocolV2, map[string]json.RawMessage{}
	for k, v := range res.Capabilities {
		if k == "sampling" || k == "storage" || k == "fileTransport" || k == "files" {
			p.Capabilities[k] = v // only what the host offered can be negotiated
		}
	}
	p.ServerInfo = res.ServerInfo
	if len(p.ServerInfo) == 0 {
		p.ServerInfo = res.ServerInfoCamel
	}
	return nil
}

func (p *Process) describe(ctx context.Context) error {
	timeout := p.opts.Timeouts.Describe
	if p.cfg.Onefile && p.cfg.FirstRun {
		timeout = p.opts.Timeouts.DescribeOnefile
	}
	m, err := p.call(ctx, "describe", map[string]any{}, timeout)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	if m.Error != nil {
		return fmt.Errorf("describe: %w", m.Error)
	}
	man, err := ParseManifest(m.Result)
	if err != nil {
		return fmt.Errorf("describe: invalid manifest:\n%w", err)
	}
	p.Manifest = man
	return nil
}

// InvokeRequest is one tool call.
type InvokeRequest struct {
	Tool      string
	Arguments json.RawMessage
	UserID    string
	// AppID and AppSlug are set only when the invoke comes from an App
	// context the host attests.
	AppID, AppSlug string
}

// InvokeResult is the plugin's answer.
type InvokeResult struct {
	InvokeID   string
	Success    bool            `json:"success"`
	Data       json.RawMessage `json:"data,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms,omitempty"`
}

// Invoke calls a tool with a freshly built context: credentials (handles),
// invoke_id, and for v2 sessions the tokens the manifest declares. Handles
// are revoked when the invoke ends.
func (p *Process) Invoke(ctx context.Context, req InvokeRequest) (*InvokeResult, error) {
	tool, ok := p.Manifest.Tool(req.Tool)
	if !ok {
		return nil, ErrUnknownTool
	}
	timeout := p.opts.Timeouts.Invoke
	if tool.Timeout > 0 {
		timeout = time.Duration(tool.Timeout) * time.Second
	}
	deadline := time.Now().Add(timeout)
	var b [16]byte
	_, _ = rand.Read(b[:])
	invokeID := hex.EncodeToString(b[:])
	binding := tokens.Binding{UserID: req.UserID, ExecutaToolID: p.cfg.Name + "/" + req.Tool, ToolInvokeID: invokeID}
	if binding.UserID == "" {
		binding.UserID = "local"
	}
	c := map[string]any{"invoke_id": invokeID}
	live := &liveInvoke{id: invokeID, binding: binding}
	creds, err := p.credentials(ctx, invokeID, deadline)
	defer func() {
		if p.opts.Broker != nil {
			if _, err := p.opts.Broker.RevokeInvocation(context.WithoutCancel(ctx), invokeID); err != nil {
				p.log.Error("revoke invoke handles", "err", err)
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	c["credentials"] = creds
	if p.Protocol == ProtocolV2 && p.opts.Tokens != nil {
		if _, negotiated := p.Capabilities["sampling"]; negotiated && p.Manifest.Has(CapSample) {
			tok, err := p.opts.Tokens.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceSampling, Binding: binding,
				Deadline: deadline, MaxTokensPerCall: p.opts.MaxTokensPerCall, MaxCallsPerInvoke: p.opts.MaxCallsPerInvoke})
			if err != nil {
				return nil, fmt.Errorf("sampling token: %w", err)
			}
			c["sampling_token"] = tok.Raw
			live.samplingToken = tok.Raw
		}
		if p.Manifest.wantsStorageToken() {
			tok, err := p.opts.Tokens.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceStorage, Binding: binding,
				Deadline: deadline, AppID: req.AppID, AppSlug: req.AppSlug})
			if err != nil {
				return nil, fmt.Errorf("storage token: %w", err)
			}
			c["storage_token"] = tok.Raw
			live.storageToken = tok.Raw
		}
	}
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	p.mu.Lock()
	p.invokes[invokeID] = live
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.invokes, invokeID)
		p.mu.Unlock()
	}()
	m, err := p.call(ctx, "invoke", map[string]any{"tool": req.Tool, "arguments": args, "context": c}, timeout)
	if errors.Is(err, ErrTimeout) {
		// The tool timed out: the host sends SIGTERM.
		supervise.Signal(p.cmd, syscall.SIGTERM)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, m.Error
	}
	res := &InvokeResult{InvokeID: invokeID}
	if err := json.Unmarshal(m.Result, res); err != nil {
		return nil, errors.New("invoke result is not an object")
	}
	return res, nil
}

// credentials delivers declared credentials: a handle per brokered one,
// the value for the explicit raw opt-in (logged).
func (p *Process) credentials(ctx context.Context, invokeID string, deadline time.Time) (map[string]string, error) {
	out := map[string]string{}
	for _, c := range p.Manifest.Credentials {
		if intent, ok := p.cfg.Credentials[c.Name]; ok && p.opts.Broker != nil {
			// No destinations: the broker uses the intent binding's.
			iss, err := p.opts.Broker.Issue(ctx, broker.IssueRequest{PluginID: p.cfg.Name, InvocationID: invokeID,
				Intent: intent, Deadline: deadline})
			if err != nil {
				return nil, fmt.Errorf("credential %s: %w", c.Name, err)
			}
			out[c.Name] = iss.Handle
			continue
		}
		if intent, ok := p.cfg.RawCredentials[c.Name]; ok && p.opts.Secrets != nil {
			s, err := p.opts.Secrets.SecretFor(ctx, intent, false)
			if err != nil {
				return nil, fmt.Errorf("credential %s: %w", c.Name, err)
			}
			p.log.Warn("raw secret delivered to plugin (explicit opt-in)", "credential", c.Name, "intent", intent)
			out[c.Name] = s.Value
		}
	}
	return out, nil
}

// Health asks the plugin; -32601 means healthy.
func (p *Process) Health(ctx context.Context) error {
	m, err := p.call(ctx, "health", map[string]any{}, p.opts.Timeouts.Health)
	if err != nil {
		return err
	}
	if m.Error != nil {
		if m.Error.Code == CodeMethodNotFound {
			return nil
		}
		return m.Error
	}
	var res struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(m.Result, &res)
	if res.Status != "ready" {
		return fmt.Errorf("plugin health is %q", res.Status)
	}
	return nil
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitReason explains an exit the host did not ask for.
func (p *Process) ExitReason() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil
	}
	if p.exitErr == nil && p.answers <= 3 {
		// initialize, describe, one more: the long-running contract broke.
		return ErrExitedEarly
	}
	if p.exitErr != nil {
		return fmt.Errorf("%w: %v", ErrPluginExited, p.exitErr)
	}
	return ErrPluginExited
}

// Shutdown follows the contract: close stdin, wait StdinGrace, SIGTERM,
// wait TermGrace, SIGKILL.
func (p *Process) Shutdown() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	_ = p.stdin.Close()
	supervise.Stop(p.cmd, p.exited,
		supervise.Step{Wait: p.opts.Timeouts.StdinGrace, Signal: syscall.SIGTERM},
		supervise.Step{Wait: p.opts.Timeouts.TermGrace, Signal: syscall.SIGKILL})
	os.RemoveAll(p.tmpdir)
}

func (p *Process) kill() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		supervise.Signal(p.cmd, syscall.SIGKILL)
		<-p.exited
	}
	os.RemoveAll(p.tmpdir)
}

type stderrLog struct{ log *slog.Logger }

func (w *stderrLog) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if len(line) > 2048 {
			line = line[:2048] + "…"
		}
		w.log.Info("plugin stderr", "line", line)
	}
	return len(b), nil
}
