package api

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// authMetadata is the gRPC metadata key that carries the broker token, as
// "Bearer <token>".
const authMetadata = "authorization"

// Authenticator says whether a presented token is the broker API's
// (peerauth.Token).
type Authenticator interface {
	Match(presented string) bool
}

// AuthOptions are the gRPC server options that refuse, with
// codes.Unauthenticated, every call that does not carry the token
// (broker.api.token_file). A peer admitted by uid is not enough: a
// plugin may share the host's uid; it cannot read the token. Refusals
// are logged with the method, never with what was presented.
func AuthOptions(auth Authenticator, log *slog.Logger) []grpc.ServerOption {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	check := func(ctx context.Context, method string) error {
		err := authenticate(ctx, auth)
		if err != nil {
			args := []any{"method", method}
			if who, ok := peerauth.PeerOf(ctx); ok {
				args = append(args, "peer_uid", who.UID, "peer_pid", who.PID)
			}
			log.Warn("broker API: call refused: "+status.Convert(err).Message(), args...)
			peerauth.Refused("broker API", "token")
		}
		return err
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

func authenticate(ctx context.Context, auth Authenticator) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(authMetadata)
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "no token presented: every broker API call carries the token of broker.api.token_file")
	}
	tok, ok := strings.CutPrefix(vals[0], "Bearer ")
	if len(vals) != 1 || !ok || !auth.Match(tok) {
		return status.Error(codes.Unauthenticated, "the token presented is not the one in broker.api.token_file")
	}
	return nil
}

// tokenCredentials presents the token in a file on every call, read anew
// each time so that a token serve created again (after its file was
// removed) is picked up without a restart.
type tokenCredentials struct{ path string }

func (c tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := peerauth.ReadToken("broker.api.token_file", c.path)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, "cannot present the broker token: "+err.Error())
	}
	return map[string]string{authMetadata: "Bearer " + tok}, nil
}

// RequireTransportSecurity is false: on the unix socket the directory and
// the peer-uid check protect the token; over TCP, Dial insists on TLS.
func (tokenCredentials) RequireTransportSecurity() bool { return false }
