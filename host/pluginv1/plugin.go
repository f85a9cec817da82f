package pluginv1

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/supervise"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// Bounds from plugin/v1.
const (
	MaxDescriptorBytes = 2 << 20
	MaxDescriptorFiles = 64
	SpecVersion        = "1.0"
)

// Installed is a provider as install recorded it.
type Installed struct {
	Name            string
	Binary          string
	BinarySHA256    string // hex
	Manifest        *pb.Manifest
	ProtocolVersion uint32 // locked at install
}

// Errors of the launch sequence; each wraps the detail of what failed.
var (
	ErrBinaryDigest      = errors.New("provider binary does not match its installed digest")
	ErrHandshake         = errors.New("handshake failed")
	ErrManifestMismatch  = errors.New("provider manifest differs from the installed one")
	ErrDescriptors       = errors.New("provider descriptors are not acceptable")
	ErrInvocationUnknown = errors.New("invocation is not in flight for this plugin")
)

// isPermanent: launch failures a restart cannot fix (the installed
// package or manifest no longer matches).
func isPermanent(err error) bool {
	return errors.Is(err, ErrBinaryDigest) || errors.Is(err, ErrManifestMismatch) || errors.Is(err, ErrDescriptors) ||
		errors.Is(err, ErrKeylessProvider)
}

// Plugin is a launched provider.
type Plugin struct {
	inst     Installed
	offer    []uint32 // protocol versions offered at launch
	version  uint32   // negotiated
	opts     host.Options
	proc     launch.Runner
	conn     *grpc.ClientConn
	client   pb.PluginServiceClient
	host     *grpc.Server
	dirs     []string
	log      *slog.Logger
	keys     launchKeys
	socket   string // the provider's, from its handshake line
	hostSock string // the plugin's HostService socket
	refused  *prometheus.CounterVec
	// refusalLog paces the log lines of refused calls.
	refusalLog *rate.Limiter

	mu  sync.Mutex
	uid int // the provider's, when ownUID
	// specVersion is the spec_version the provider's Handshake answered
	// (recorded, never acted on).
	specVersion string
	ownUID      bool // it runs as a uid of its own: only that uid may call HostService
	inflight    map[string]*invocation
	closed      bool
	notServing  bool // the last Health said NOT_SERVING (or failed)
}

// Launch starts the provider and takes it through the handshake, offering
// only the protocol version locked at install. On any failure the process
// is killed and nothing is left behind.
func Launch(ctx context.Context, inst Installed, opts host.Options) (*Plugin, error) {
	return startProvider(ctx, inst, opts, []uint32{inst.ProtocolVersion})
}

func startProvider(ctx context.Context, inst Installed, opts host.Options, offer []uint32) (_ *Plugin, err error) {
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = host.DefaultHandshakeTimeout
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = host.DefaultShutdownGrace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if err := checkDigest(inst.Binary, inst.BinarySHA256); err != nil {
		return nil, err
	}
	p := &Plugin{inst: inst, opts: opts, offer: offer, inflight: map[string]*invocation{},
		log: opts.Log.With("plugin", inst.Name, "kind", string(host.KindPluginV1)), keys: newLaunchKeys(),
		refused: newRefusedCounter(opts.Registerer), refusalLog: newRefusalLogLimit()}
	defer func() {
		if err != nil {
			p.kill()
			p.cleanup()
			for _, d := range p.dirs {
				os.RemoveAll(d)
			}
			p.record("lifecycle.launch_failed", "", map[string]any{"reason": err.Error()})
		}
	}()

	// The HostService socket: one per plugin. A connection to it is not
	// proof of who made it (same-uid processes can reach it): every call
	// carries the plugin's key, and the peer's uid is checked where the
	// plugin has one of its own.
	hostDir, err := launch.MkdirPrivate("airlock-host-")
	if err != nil {
		return nil, err
	}
	p.dirs = append(p.dirs, hostDir)
	hostSock := filepath.Join(hostDir, "h.sock")
	p.hostSock = hostSock
	hl, err := net.Listen("unix", hostSock)
	if err != nil {
		return nil, fmt.Errorf("host service socket: %w", err)
	}
	p.host = grpc.NewServer(p.hostServiceOptions()...)
	pb.RegisterHostServiceServer(p.host, &hostService{p: p})
	go func() { _ = p.host.Serve(hl) }()

	var dests []broker.Destination
	for _, ci := range inst.Manifest.GetCredentialIntents() {
		for _, d := range ci.GetDestinations() {
			dests = append(dests, broker.Destination{Host: d.GetHost(), Port: int(d.GetPort())})
		}
	}
	// Only the protocol's variables, this launch's keys and the proxy:
	// nothing of the host's.
	proc, err := launch.Start(ctx, launch.Request{Plugin: inst.Name, Path: inst.Binary, InstallDir: filepath.Dir(inst.Binary),
		Env: append([]string{
			plugin.CookieEnv + "=" + plugin.MagicCookie,
			plugin.ProtocolsEnv + "=" + versionsEnv(offer),
			plugin.HostAddrEnv + "=unix:" + hostSock,
		}, p.keys.env...),
		NoHTTPS: slices.Contains(opts.HTTPSProxyOptOut, inst.Name), PassDests: broker.Places(dests),
		Sockets: []string{hostDir}, Dirs: []string{hostDir},
	}, opts.LaunchOptions(p.log))
	if err != nil {
		return nil, fmt.Errorf("start provider: %w", err)
	}
	p.proc, p.dirs = proc, nil // the directories now die with the process
	p.mu.Lock()
	p.uid, p.ownUID = pluginUID(proc)
	p.mu.Unlock()
	stdout := proc.Stdout()

	type lineResult struct {
		hl  HandshakeLine
		err error
	}
	lc := make(chan lineResult, 1)
	go func() {
		hl, err := ReadHandshakeLine(stdout)
		lc <- lineResult{hl, err}
		_, _ = io.Copy(io.Discard, stdout) // a provider may print more; never block it
		stdout.Close()
	}()
	var line HandshakeLine
	select {
	case r := <-lc:
		if r.err != nil {
			if x := exitOf(proc); x != nil {
				return nil, fmt.Errorf("%w: %w (the provider exited: %w)", ErrHandshake, r.err, x)
			}
			return nil, fmt.Errorf("%w: %w", ErrHandshake, r.err)
		}
		line = r.hl
	case <-time.After(opts.HandshakeTimeout):
		return nil, fmt.Errorf("%w: no handshake line within %s", ErrHandshake, opts.HandshakeTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !slices.Contains(offer, line.AppVersion) {
		return nil, fmt.Errorf("%w: the line's app protocol version is not one offered", ErrHandshake)
	}
	p.version, p.socket = line.AppVersion, line.Socket
	p.conn, err = grpc.NewClient("unix://"+line.Socket, providerCallOptions(p.keys.hostKey)...)
	if err != nil {
		return nil, fmt.Errorf("%w: socket: not a dialable unix socket path", ErrHandshake)
	}
	p.client = pb.NewPluginServiceClient(p.conn)
	if err := p.handshake(ctx, line); err != nil {
		return nil, err
	}
	if err := p.probe(ctx, line.Socket); err != nil {
		return nil, err
	}
	p.record("lifecycle.launch", "", map[string]any{"protocol_version": line.AppVersion, "binary_sha256": inst.BinarySHA256,
		"sandbox": string(proc.Level()), "spec_version": p.specVersion, "host_spec_version": SpecVersion})
	return p, nil
}

func checkDigest(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("provider binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("provider binary: %w", err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if subtle.ConstantTimeCompare([]byte(got), []byte(strings.ToLower(want))) != 1 {
		return ErrBinaryDigest
	}
	return nil
}

// BinaryDigest returns the hex SHA-256 of a file (what install records).
func BinaryDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// specVersionForm is what a provider's spec_version may be to be
// recorded as it is: a short version string.
var specVersionForm = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+-]{0,31}$`)

func (p *Plugin) handshake(ctx context.Context, line HandshakeLine) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.HandshakeTimeout)
	defer cancel()
	offer := p.offer
	resp, err := p.client.Handshake(ctx, &pb.HandshakeRequest{SpecVersion: SpecVersion, ProtocolVersions: offer,
		Ports: p.inst.Manifest.GetPorts()})
	if err != nil {
		return fmt.Errorf("%w: Handshake failed with code %s", ErrHandshake, status.Code(err))
	}
	// The provider's spec_version is recorded (lifecycle.launch), never
	// acted on; as the provider's, it is kept only in a bounded, plain
	// form ("invalid" otherwise).
	p.specVersion = "invalid"
	if v := resp.GetSpecVersion(); specVersionForm.MatchString(v) {
		p.specVersion = v
	}
	if v := resp.GetProtocolVersion(); v == 0 || !slices.Contains(offer, v) || v != line.AppVersion {
		return fmt.Errorf("%w: protocol_version is not the offered one on the handshake line", ErrHandshake)
	}
	// The host offers no vendor capabilities yet: any claimed one aborts.
	for range resp.GetCapabilities() {
		return fmt.Errorf("%w: capabilities names a capability the host did not offer", ErrHandshake)
	}
	for _, port := range p.inst.Manifest.GetPorts() {
		if _, ok := p.opts.Ports.Lookup(port); !ok {
			return fmt.Errorf("%w: the host serves no port %s", ErrHandshake, port)
		}
	}
	m, err := p.client.GetManifest(ctx, &pb.GetManifestRequest{}, grpc.MaxCallRecvMsgSize(MaxManifestSize))
	if err != nil {
		return fmt.Errorf("%w: GetManifest failed with code %s", ErrManifestMismatch, status.Code(err))
	}
	if !sameManifest(p.inst.Manifest, m) {
		return ErrManifestMismatch
	}
	set, err := p.client.GetDescriptors(ctx, &pb.GetDescriptorsRequest{}, grpc.MaxCallRecvMsgSize(MaxDescriptorBytes))
	if err != nil {
		return fmt.Errorf("%w: GetDescriptors failed with code %s", ErrDescriptors, status.Code(err))
	}
	return p.checkDescriptors(set)
}

// checkDescriptors: shared port files must equal the host's copy in every
// option (source_code_info discarded); private files may not use the
// numinance. or google. packages nor extend google.protobuf options.
func (p *Plugin) checkDescriptors(set *descriptorpb.FileDescriptorSet) error {
	if len(set.GetFile()) > MaxDescriptorFiles {
		return fmt.Errorf("%w: more than %d files", ErrDescriptors, MaxDescriptorFiles)
	}
	for i, f := range set.GetFile() {
		f = proto.Clone(f).(*descriptorpb.FileDescriptorProto)
		f.SourceCodeInfo = nil
		pkg := f.GetPackage()
		if host, ok := p.opts.Ports.Lookup(pkg); ok {
			want := protodesc.ToFileDescriptorProto(host)
			want.SourceCodeInfo = nil
			if !proto.Equal(want, f) {
				return fmt.Errorf("%w: file[%d] differs from the host's copy of its port", ErrDescriptors, i)
			}
			continue
		}
		if strings.HasPrefix(pkg, "numinance.") || strings.HasPrefix(pkg, "google.") || pkg == "numinance" || pkg == "google" {
			if strings.HasPrefix(pkg, "google.protobuf") || pkg == "numinance.plugin.v1" {
				continue // well-known imports; the host's own copies are used
			}
			return fmt.Errorf("%w: file[%d] uses a reserved package prefix", ErrDescriptors, i)
		}
		for _, ext := range f.GetExtension() {
			if strings.HasPrefix(strings.TrimPrefix(ext.GetExtendee(), "."), "google.protobuf.") {
				return fmt.Errorf("%w: file[%d] extends a google.protobuf options message", ErrDescriptors, i)
			}
		}
	}
	return nil
}

// record appends a host-authored evidence record; failures are logged.
func (p *Plugin) record(typ, invocation string, data map[string]any) (evidence.Record, error) {
	return p.opts.Record(p.inst.Name, typ, invocation, data)
}

// Health asks the provider and remembers the answer: a plugin that is not
// serving (NOT_SERVING, the zero value, or no answer) accepts no Invoke
// until a later Health says SERVING.
func (p *Plugin) Health(ctx context.Context) error {
	if err := p.proc.PassErr(ctx); err != nil {
		return fmt.Errorf("%w: %w", host.ErrProbeFailed, err)
	}
	err := p.health(ctx)
	p.mu.Lock()
	p.notServing = err != nil
	p.mu.Unlock()
	return err
}

func (p *Plugin) health(ctx context.Context) error {
	r, err := p.client.Health(ctx, &pb.HealthRequest{})
	if err != nil {
		return fmt.Errorf("%w: %w: Health failed with code %s", host.ErrNotServing, host.ErrProbeFailed, status.Code(err))
	}
	switch r.GetStatus() {
	case pb.HealthStatus_HEALTH_STATUS_SERVING:
		return nil
	case pb.HealthStatus_HEALTH_STATUS_NOT_SERVING:
		return host.ErrNotServing
	}
	return fmt.Errorf("%w: %w: health status is unspecified", host.ErrNotServing, host.ErrProbeFailed)
}

// Kind is plugin/v1.
func (p *Plugin) Kind() host.Kind { return host.KindPluginV1 }

// Protocol is the negotiated app protocol version.
func (p *Plugin) Protocol() string { return strconv.FormatUint(uint64(p.version), 10) }

// Sandbox is the sandbox level the provider runs at.
func (p *Plugin) Sandbox() string { return string(p.proc.Level()) }

// Pid is the provider's process id.
func (p *Plugin) Pid() int { return p.proc.Pid() }

// Exited is closed when the provider process has exited and its process
// group is dead.
func (p *Plugin) Exited() <-chan struct{} { return p.proc.Exited() }

// Fault: every exit of a provider the host did not ask for is one.
func (p *Plugin) Fault() error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil
	}
	if err := p.proc.Err(); err != nil {
		return fmt.Errorf("provider exited unexpectedly: %w", err)
	}
	return errors.New("provider exited unexpectedly with status 0")
}

// Shutdown cancels in-flight invocations, revokes the plugin's handles,
// asks the provider to stop, and kills its process group when the grace
// (one budget for the RPC and the exit) has passed, or at ctx's deadline
// when that is sooner.
func (p *Plugin) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, inv := range p.inflight {
		inv.cancel()
	}
	p.mu.Unlock()
	deadline := time.Now().Add(p.opts.ShutdownGrace)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	revokeErr := p.proc.Revoke(context.WithoutCancel(ctx))
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	_, _ = p.client.Shutdown(sctx, &pb.ShutdownRequest{})
	cancel()
	if p.proc.Stop(supervise.Step{Wait: time.Until(deadline), Signal: syscall.SIGKILL}) > 0 {
		p.log.Warn("provider did not exit within the shutdown grace; killed its process group", "grace", p.opts.ShutdownGrace)
	}
	p.cleanup()
	p.record("lifecycle.shutdown", "", nil)
	return revokeErr
}

func (p *Plugin) kill() {
	if p.proc != nil {
		p.proc.Kill()
	}
}

// Kill ends the provider's process group at once (the host may always do
// so).
func (p *Plugin) Kill() { p.kill() }

func (p *Plugin) cleanup() {
	if p.conn != nil {
		p.conn.Close()
	}
	if p.host != nil {
		p.host.Stop()
	}
}

// exitOf is how a provider that ended its stdout before a handshake line
// exited (its status and stderr tail): nil when it has not exited within
// a second (it closed stdout and runs on; the launch kills it).
func exitOf(proc launch.Runner) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-proc.Exited():
		return proc.ExitErr()
	case <-t.C:
		return nil
	}
}
