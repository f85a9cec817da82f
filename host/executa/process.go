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
	"github.com/airlock-dev/airlock/internal/redact"
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

// PluginConfig is one Executa plugin as the security team configured it:
// an entry of host.executa.plugins in the config file.
type PluginConfig struct {
	Name    string   `yaml:"name"`
	Command string   `yaml:"command"` // absolute path
	Args    []string `yaml:"args"`
	// Strict passes only PATH, HOME, LANG, TMPDIR and the proxy.
	Strict  bool     `yaml:"strict"`
	EnvDeny []string `yaml:"env_deny"`
	// Onefile gives the first describe 60 s (PyInstaller-style unpack).
	Onefile bool `yaml:"onefile"`
	// FirstRun is set by the host on the first launch of this binary
	// (describe gets 60 s when Onefile).
	FirstRun bool `yaml:"-"`
	// Credentials map each credential the manifest declares to a broker
	// intent: the plugin receives a handle, never the secret.
	Credentials map[string]string `yaml:"credentials"`
	// RawCredentials is the explicit, logged opt-in for plugins that cannot
	// use the proxy: the secret value itself is delivered.
	RawCredentials map[string]string `yaml:"-"`
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
	// Record, when set, receives the host-authored evidence of this
	// plugin's invokes (credential.issued).
	Record func(typ, invocation string, data map[string]any)
	// StderrLevel and Redactor shape the plugin's stderr log lines.
	StderrLevel slog.Level
	Redactor    *redact.Redactor
}

// Errors.
var (
	ErrStopped      = errors.New("plugin is stopped")
	ErrUnknownTool  = errors.New("tool is not in the plugin's manifest")
	ErrTimeout      = errors.New("plugin did not answer in time")
	ErrPluginExited = errors.New("plugin process exited")
	ErrExitedEarly  = errors.New("plugin exited after one response: it must keep reading stdin until EOF (Executa pitfall #1)")
	// ErrInvalidManifest: describe returned a manifest that does not
	// validate.
	ErrInvalidManifest = errors.New("invalid manifest")
	// ErrFileTransportRefused: the plugin announced its answer in a file
	// the host may not read (not negotiated, or outside its temp dir).
	ErrFileTransportRefused = errors.New("file transport refused")
	// ErrNotReady: the plugin says it is not ready yet (initializing).
	ErrNotReady = errors.New("plugin is not ready")
	// ErrUnhealthy: the plugin gave no valid health answer, or said it is
	// in error.
	ErrUnhealthy = errors.New("plugin is unhealthy")
)

// fileTransportRefused stands in for an answer whose file was refused.
var fileTransportRefused = &RPCError{Code: CodeInternalError, Message: "file transport refused"}

// ToolError is an invoke the plugin answered with a JSON-RPC error; the
// plugin's message is not kept (it is plugin-supplied).
type ToolError struct{ Code int }

func (e *ToolError) Error() string {
	return fmt.Sprintf("the plugin answered invoke with error code %d", e.Code)
}

// Process is one running Executa plugin.
type Process struct {
	cfg    PluginConfig
	opts   Options
	proc   *supervise.Proc
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
		progress: newProgressLog(), log: opts.Log.With("plugin", cfg.Name, "kind", "executa")}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = pluginEnv(os.Environ(), cfg.Strict, cfg.EnvDeny, opts.EgressProxy, tmp)
	cmd.Dir = tmp
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	p.stdin = stdin
	// Our own stdout pipe: cmd.Wait must not close it under the reader.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	cmd.Stdout = stdoutW
	proc, err := supervise.Start(cmd, supervise.ProcOptions{Dirs: []string{tmp}, CloseAfterStart: []io.Closer{stdoutW},
		Stderr: supervise.NewLineLog(p.log, opts.StderrLevel, opts.Redactor)})
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("spawn %s: %w", cfg.Name, err)
	}
	p.proc = proc
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
	bad := &Message{ID: m.ID, Error: fileTransportRefused}
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
		return fmt.Errorf("describe: the plugin answered with error code %d", m.Error.Code)
	}
	man, err := ParseManifest(m.Result)
	if err != nil {
		return fmt.Errorf("describe: %w:\n%w", ErrInvalidManifest, err)
	}
	p.Manifest = man
	return nil
}

// InvokeRequest is one tool call.
type InvokeRequest struct {
	// InvokeID is the host's invocation id (sent as invoke_id); a random
	// one when empty.
	InvokeID string
	// Deadline, when set, bounds the call besides the tool's timeout.
	Deadline  time.Time
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
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = req.Deadline
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	invokeID := req.InvokeID
	if invokeID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		invokeID = hex.EncodeToString(b[:])
	}
	binding := tokens.Binding{UserID: req.UserID, ExecutaToolID: p.cfg.Name + "/" + req.Tool, ToolInvokeID: invokeID}
	if binding.UserID == "" {
		binding.UserID = "local"
	}
	c := map[string]any{"invoke_id": invokeID}
	live := &liveInvoke{ctx: ctx, id: invokeID, binding: binding}
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
	// invoke_id in params too: SDKs read it there (and some only there).
	m, err := p.call(ctx, "invoke", map[string]any{"tool": req.Tool, "arguments": args, "context": c, "invoke_id": invokeID},
		time.Until(deadline))
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		// The tool ran past its deadline (ours or the caller's): the host
		// sends SIGTERM; the supervisor restarts the plugin.
		p.proc.Signal(syscall.SIGTERM)
		return nil, ErrTimeout
	}
	if err != nil {
		return nil, err
	}
	if m.Error == fileTransportRefused {
		return nil, ErrFileTransportRefused
	}
	if m.Error != nil {
		return nil, &ToolError{Code: m.Error.Code}
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
	for i, c := range p.Manifest.Credentials {
		if intent, ok := p.cfg.Credentials[c.Name]; ok && p.opts.Broker != nil {
			// No destinations: the broker uses the intent binding's.
			iss, err := p.opts.Broker.Issue(ctx, broker.IssueRequest{PluginID: p.cfg.Name, InvocationID: invokeID,
				Intent: intent, Deadline: deadline})
			if err != nil {
				return nil, fmt.Errorf("credentials[%d]: %w", i, err)
			}
			out[c.Name] = iss.Handle
			if p.opts.Record != nil {
				p.opts.Record("credential.issued", invokeID, map[string]any{"credential": c.Name, "intent": intent,
					"handle_fp": iss.Fingerprint, "expires_at": iss.ExpiresAt})
			}
			continue
		}
		if intent, ok := p.cfg.RawCredentials[c.Name]; ok && p.opts.Secrets != nil {
			s, err := p.opts.Secrets.SecretFor(ctx, intent, false)
			if err != nil {
				return nil, fmt.Errorf("credentials[%d]: %w", i, err)
			}
			p.log.Warn("raw secret delivered to plugin (explicit opt-in)", "credential", c.Name, "intent", intent)
			out[c.Name] = s.Value
		}
	}
	return out, nil
}

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

// Shutdown follows the contract: close stdin, wait StdinGrace, SIGTERM
// the process group, wait TermGrace, SIGKILL.
func (p *Process) Shutdown() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	_ = p.stdin.Close()
	p.proc.Stop(
		supervise.Step{Wait: p.opts.Timeouts.StdinGrace, Signal: syscall.SIGTERM},
		supervise.Step{Wait: p.opts.Timeouts.TermGrace, Signal: syscall.SIGKILL})
}

// Kill ends the process group at once.
func (p *Process) Kill() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.proc.Kill()
}

func (p *Process) kill() { p.Kill() }
