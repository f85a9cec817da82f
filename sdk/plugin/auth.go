package plugin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Airlock's per-launch keys: an extension of plugin/v1 carried in the
// environment and in gRPC metadata (the protocol's messages are
// unchanged). Each direction has a key of its own, so that knowing one
// grants nothing in the other.
const (
	// HostKeyDigestEnv holds the hex SHA-256 of the key the host presents
	// on every PluginService call (HostKeyMetadata). The provider holds
	// the digest only: nothing in its environment lets anyone call it.
	HostKeyDigestEnv = "AIRLOCK_HOST_KEY_SHA256"
	// PluginKeyEnv holds the key the provider presents on every
	// HostService call (PluginKeyMetadata).
	PluginKeyEnv = "AIRLOCK_PLUGIN_KEY"
)

// The gRPC metadata keys of the extension.
const (
	// HostKeyMetadata carries the host's key on every PluginService call.
	HostKeyMetadata = "airlock-host-key"
	// PluginKeyMetadata carries the plugin's key on every HostService
	// call.
	PluginKeyMetadata = "airlock-plugin-key"
	// InvocationKeyMetadata carries an invocation's own key: the host
	// sends a new one with each Invoke, and every HostService call made
	// for that invocation presents it back.
	InvocationKeyMetadata = "airlock-invocation-key"
	// ProbeKeyMetadata carries the host's key on the one call the host
	// makes at launch without HostKeyMetadata, to learn whether the
	// provider checks the key. A provider refuses that call like any
	// other without the key; the key in this place only tells it that the
	// refusal need not be reported.
	ProbeKeyMetadata = "airlock-probe-key"
	// ReportMetadata marks a HostService.Log call with no invocation id
	// as the provider's report of a call it refused (ReportRefused).
	ReportMetadata = "airlock-report"
	// TraceparentMetadata carries the W3C traceparent of the host's
	// invocation span with each Invoke when the host traces (Traceparent
	// reads it): a provider's own spans, and the requests it sends
	// through the egress proxy with a traceparent header, join the
	// invocation's trace.
	TraceparentMetadata = "traceparent"
)

// ReportRefused is ReportMetadata's value on a refusal report.
const ReportRefused = "refused-call"

// MinKeyLen is the shortest plugin key a provider accepts: 256 random
// bits in base64url.
const MinKeyLen = 43

// ErrNoLaunchKey: the provider was started without its launch keys (by
// a host older than them, or by hand with the cookie copied). It does
// not serve: a provider without them would answer any caller.
var ErrNoLaunchKey = errors.New("this provider was started without its launch keys")

// launchKeys are what a provider is given at launch.
type launchKeys struct {
	hostDigest [sha256.Size]byte // of the key the host presents
	pluginKey  string            // the key this provider presents
}

// readLaunchKeys reads the keys; errors name the variable, never what
// it holds.
func readLaunchKeys(getenv func(string) string) (launchKeys, error) {
	var k launchKeys
	d := getenv(HostKeyDigestEnv)
	if d == "" {
		return k, fmt.Errorf("%w: %s is not set", ErrNoLaunchKey, HostKeyDigestEnv)
	}
	b, err := hex.DecodeString(d)
	if err != nil || len(b) != sha256.Size {
		return k, fmt.Errorf("%w: %s must be 64 hex digits", ErrNoLaunchKey, HostKeyDigestEnv)
	}
	copy(k.hostDigest[:], b)
	k.pluginKey = getenv(PluginKeyEnv)
	if k.pluginKey == "" {
		return k, fmt.Errorf("%w: %s is not set", ErrNoLaunchKey, PluginKeyEnv)
	}
	if len(k.pluginKey) < MinKeyLen || strings.ContainsFunc(k.pluginKey, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return k, fmt.Errorf("%w: %s must be at least %d printable characters", ErrNoLaunchKey, PluginKeyEnv, MinKeyLen)
	}
	return k, nil
}

// envKeys reads the keys from the process environment once and removes
// them from it, so that no process the provider starts inherits them.
// (The kernel's copy, /proc/PID/environ, is readable only by who may
// trace the provider: not another sandboxed plugin.)
var envKeys = sync.OnceValues(func() (launchKeys, error) {
	k, err := readLaunchKeys(os.Getenv)
	os.Unsetenv(HostKeyDigestEnv)
	os.Unsetenv(PluginKeyEnv)
	return k, err
})

// servedKey is the plugin key of the provider Serve runs, for DialHost.
var servedKey atomic.Pointer[string]

// keysFor reads the launch keys from getenv, or from the process
// environment (once, then unset) when getenv is nil.
func keysFor(getenv func(string) string) (launchKeys, error) {
	if getenv == nil {
		return envKeys()
	}
	return readLaunchKeys(getenv)
}

// pluginKey is the key HostService calls present: the one Serve read,
// else the process environment's.
func pluginKey() (string, error) {
	if k := servedKey.Load(); k != nil {
		return *k, nil
	}
	k, err := envKeys()
	return k.pluginKey, err
}

// invocationKey is the context key of the invocation key Invoke carried.
type invocationKey struct{}

// guard admits a PluginService call only when it carries the key of the
// host that launched this provider; it runs before any handler.
type guard struct {
	hostDigest [sha256.Size]byte
	report     func(refusal)
}

// refusal is a call the guard refused, as the host hears of it.
type refusal struct {
	method, reason string
	uid, pid       int
	known          bool // uid and pid were read
}

// Refusal reasons, as reported to the host.
const (
	reasonNoKey    = "no_key"
	reasonWrongKey = "wrong_key"
)

func (g *guard) admit(ctx context.Context, method string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(HostKeyMetadata)
	var reason, msg string
	switch {
	case len(vals) == 0:
		reason, msg = reasonNoKey, HostKeyMetadata+": missing: this provider answers only the host that launched it"
	case len(vals) > 1 || !g.match(vals[0]):
		reason, msg = reasonWrongKey, HostKeyMetadata+": not the key of the host that launched this provider"
	}
	if reason != "" {
		if probe := md.Get(ProbeKeyMetadata); !(len(probe) == 1 && g.match(probe[0])) && g.report != nil {
			uid, pid, known := callerOf(ctx)
			g.report(refusal{method: method, reason: reason, uid: uid, pid: pid, known: known})
		}
		return nil, status.Error(codes.Unauthenticated, msg)
	}
	if v := md.Get(InvocationKeyMetadata); len(v) == 1 {
		ctx = context.WithValue(ctx, invocationKey{}, v[0])
	}
	return ctx, nil
}

// match compares in time independent of where the two differ.
func (g *guard) match(presented string) bool {
	sum := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(sum[:], g.hostDigest[:]) == 1
}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := g.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := g.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &keyedStream{ServerStream: ss, ctx: ctx})
}

// keyedStream is a server stream whose context holds the invocation key.
type keyedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *keyedStream) Context() context.Context { return s.ctx }

// hostCallOptions make every HostService call present the plugin key,
// and the invocation key of the Invoke whose context (or a context
// derived from it) the call is made with.
func hostCallOptions(key string) []grpc.DialOption {
	add := func(ctx context.Context) context.Context {
		kv := []string{PluginKeyMetadata, key}
		if inv, ok := ctx.Value(invocationKey{}).(string); ok {
			kv = append(kv, InvocationKeyMetadata, inv)
		}
		return metadata.AppendToOutgoingContext(ctx, kv...)
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoke(add(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			stream grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return stream(add(ctx), desc, cc, method, opts...)
		}),
	}
}
