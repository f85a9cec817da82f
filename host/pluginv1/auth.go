package pluginv1

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/peerauth"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// ErrKeylessProvider: the provider answered the launch probe, a call that
// did not carry the host's key. Any process that can reach its socket
// could call it, so the host does not use it.
var ErrKeylessProvider = errors.New("the provider answers calls that do not carry its host's key " +
	"(built with an sdk/plugin older than launch keys?): rebuild it with the current sdk/plugin, " +
	"or make it refuse, with Unauthenticated, every call without " + plugin.HostKeyMetadata + " (docs/plugin-v1.md)")

// launchKeys are one launch's secrets, one per direction, so that
// knowing one grants nothing in the other: the host presents hostKey on
// every PluginService call (the provider is given only its digest); the
// plugin presents the key pluginKey matches on every HostService call.
type launchKeys struct {
	hostKey   string
	pluginKey *peerauth.Token
	env       []string // what the provider is given
}

// newLaunchKeys makes a launch's keys: 256 random bits each.
func newLaunchKeys() launchKeys {
	host, own := peerauth.NewSecret(), peerauth.NewSecret()
	sum := sha256.Sum256([]byte(host))
	return launchKeys{hostKey: host, pluginKey: peerauth.NewToken(own), env: []string{
		plugin.HostKeyDigestEnv + "=" + hex.EncodeToString(sum[:]),
		plugin.PluginKeyEnv + "=" + own,
	}}
}

// providerCallOptions make every PluginService call on the connection
// present the host's key.
func providerCallOptions(hostKey string) []grpc.DialOption {
	add := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, plugin.HostKeyMetadata, hostKey)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
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

// probe calls Health once without the host's key, over a connection of
// its own, as any other process could: the provider must refuse it
// (Unauthenticated). The key rides in ProbeKeyMetadata, which no provider
// accepts as authority, only so that the refusal is not reported as an
// attack.
func (p *Plugin) probe(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("%w: socket: not a dialable unix socket path", ErrHandshake)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, plugin.ProbeKeyMetadata, p.keys.hostKey), p.opts.HandshakeTimeout)
	defer cancel()
	_, err = pb.NewPluginServiceClient(conn).Health(ctx, &pb.HealthRequest{})
	switch status.Code(err) {
	case codes.Unauthenticated:
		return nil
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return fmt.Errorf("%w: the call without the key got no answer (code %s)", ErrHandshake, status.Code(err))
	}
	return ErrKeylessProvider
}

// pluginUID is the uid the provider runs as when it has one of its own
// (not the host's): only that uid may connect to its HostService.
func pluginUID(proc launch.Runner) (uid int, own bool) {
	return proc.UID(), proc.UID() > 0
}

// Reasons a call is refused, as logged and counted (the metric's reason
// label: a fixed set).
const (
	reasonPeerUID            = "peer_uid"
	reasonNoKey              = "no_key"
	reasonWrongKey           = "wrong_key"
	reasonInvocationUnknown  = "invocation_unknown"
	reasonNoInvocationKey    = "no_invocation_key"
	reasonWrongInvocationKey = "wrong_invocation_key"
)

// admit lets a HostService call through only from this plugin: the
// connection's peer uid is the plugin's when it has a uid of its own,
// and the call carries the plugin's key. It runs before any handler.
func (p *Plugin) admit(ctx context.Context, rpc string) error {
	p.mu.Lock()
	uid, own := p.uid, p.ownUID
	p.mu.Unlock()
	if caller, known := peerauth.PeerOf(ctx); own && (!known || caller.UID != uid) {
		return p.refuse(ctx, rpc, reasonPeerUID, status.Error(codes.Unauthenticated,
			"peer uid: not the plugin's: this HostService serves only the plugin it was made for"))
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(plugin.PluginKeyMetadata)
	switch {
	case len(vals) == 0:
		return p.refuse(ctx, rpc, reasonNoKey, status.Error(codes.Unauthenticated,
			plugin.PluginKeyMetadata+": missing: this HostService serves only the plugin it was made for"))
	case len(vals) > 1 || !p.keys.pluginKey.Match(vals[0]):
		return p.refuse(ctx, rpc, reasonWrongKey, status.Error(codes.Unauthenticated,
			plugin.PluginKeyMetadata+": not the key of the plugin this HostService was made for"))
	}
	return nil
}

// hostServiceOptions are the HostService server's: peer credentials on
// every connection, and admit before every call.
func (p *Plugin) hostServiceOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(peerauth.PeerCredentials()),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := p.admit(ctx, path.Base(info.FullMethod)); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := p.admit(ss.Context(), path.Base(info.FullMethod)); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// checkInvocationKey: the call presents the key the host sent with the
// Invoke of the invocation it names, so that one invocation cannot act
// inside another's authority (a dry run borrowing a real run's id).
func (p *Plugin) checkInvocationKey(ctx context.Context, inv *invocation, rpc string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(plugin.InvocationKeyMetadata)
	switch {
	case len(vals) == 0:
		return p.refuse(ctx, rpc, reasonNoInvocationKey, status.Error(codes.PermissionDenied,
			plugin.InvocationKeyMetadata+": missing: a HostService call presents the key of the invocation it serves "+
				"(sdk/plugin does when the call is made with the Invoke's context)"))
	case len(vals) > 1 || !inv.key.Match(vals[0]):
		return p.refuse(ctx, rpc, reasonWrongInvocationKey, status.Error(codes.PermissionDenied,
			plugin.InvocationKeyMetadata+": not the key of the invocation invocation_id names"))
	}
	return nil
}

// refuse logs a refused HostService call with who made it (uid and pid,
// as the kernel says) and counts it; it returns err. Nothing the caller
// sent is logged. Logging is rate-limited (refusalLogRate), counting is
// not.
func (p *Plugin) refuse(ctx context.Context, rpc, reason string, err error) error {
	attrs := []any{"socket", socketHostService, "rpc", rpc, "reason", reason}
	if c, ok := peerauth.PeerOf(ctx); ok {
		attrs = append(attrs, "caller_uid", c.UID, "caller_pid", c.PID)
	}
	if p.refusalLog.Allow() {
		p.log.Warn("plugin/v1: refused a HostService call: "+status.Convert(err).Message(), attrs...)
	}
	p.refused.WithLabelValues(p.inst.Name, socketHostService, reason).Inc()
	return err
}
