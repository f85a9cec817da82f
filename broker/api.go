package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/airlock-dev/airlock/tokens"
)

// API is what a plugin host needs from the broker. *Broker (embedded
// mode, in process) and broker/api's *Client (airlock serve over gRPC)
// implement it, so the host is written once.
type API interface {
	Issue(ctx context.Context, req IssueRequest) (Issued, error)
	RevokeInvocation(ctx context.Context, invocationID string) (int, error)
	RevokePlugin(ctx context.Context, pluginID string) (int, error)
}

var _ API = (*Broker)(nil)

// TokenRequest asks for an Executa token (sampling or storage).
type TokenRequest struct {
	Audience string // tokens.AudienceSampling or tokens.AudienceStorage
	tokens.Binding
	Deadline          time.Time
	MaxTokensPerCall  int
	MaxCallsPerInvoke int
	AppID, AppSlug    string
}

// Token is a minted token.
type Token struct {
	Raw       string
	ExpiresAt time.Time
	ID        string
}

// TokenMinter mints Executa tokens; broker/api's *Client implements it
// remotely, and LocalMinter with a local *tokens.Issuer.
type TokenMinter interface {
	MintToken(ctx context.Context, req TokenRequest) (Token, error)
}

// LocalMinter mints with an Issuer in this process.
type LocalMinter struct{ Issuer *tokens.Issuer }

// MintToken implements TokenMinter.
func (m LocalMinter) MintToken(_ context.Context, req TokenRequest) (Token, error) {
	return MintWith(m.Issuer, req)
}

var _ TokenMinter = LocalMinter{}

// MintWith mints req with a local issuer.
func MintWith(iss *tokens.Issuer, req TokenRequest) (Token, error) {
	var raw string
	var c *tokens.Claims
	var err error
	switch req.Audience {
	case tokens.AudienceSampling:
		raw, c, err = iss.MintSampling(tokens.SamplingGrant{Binding: req.Binding, Deadline: req.Deadline,
			MaxTokensPerCall: req.MaxTokensPerCall, MaxCallsPerInvoke: req.MaxCallsPerInvoke})
	case tokens.AudienceStorage:
		raw, c, err = iss.MintStorage(tokens.StorageGrant{Binding: req.Binding, Deadline: req.Deadline,
			AppID: req.AppID, AppSlug: req.AppSlug})
	default:
		return Token{}, ErrBadRequest
	}
	if err != nil {
		if _, code := Reason(err); code == codes.Internal && !errors.Is(err, tokens.ErrNoActiveKey) {
			// Caps, App claims or deadline missing: the request's fault.
			err = fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		return Token{}, err
	}
	return Token{Raw: raw, ExpiresAt: c.ExpiresAt.Time, ID: c.ID}, nil
}
