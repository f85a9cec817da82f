package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/peerauth"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
	"github.com/airlock-dev/airlock/tokens"
)

var (
	_ broker.API             = (*Client)(nil)
	_ broker.InvocationEnder = (*Client)(nil)
	_ broker.TokenMinter     = (*Client)(nil)
)

// Client calls a broker in another process (airlock serve) over gRPC. It
// implements API and TokenMinter, and its errors match the broker's with
// errors.Is.
type Client struct {
	conn *grpc.ClientConn
	api  brokerv1.BrokerServiceClient
}

// DialOptions say how a Client reaches and authenticates to the broker.
type DialOptions struct {
	// TokenFile holds the broker token (broker.api.token_file), presented
	// on every call; read at each call. Required.
	TokenFile string
	// TLS is the mutual-TLS client config for a host:port target;
	// plaintext TCP is refused.
	TLS *tls.Config
}

// Dial connects to target: "unix:///path/to/broker.sock", or host:port
// with o.TLS. A unix socket that does not exist is ErrBrokerUnavailable at
// once, with a message that says which setting names it.
func Dial(target string, o DialOptions) (*Client, error) {
	var creds credentials.TransportCredentials
	switch path, unix := strings.CutPrefix(target, "unix://"); {
	case unix:
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no socket at %s (is airlock serve running? it listens on broker.api.socket)", broker.ErrBrokerUnavailable, path)
		}
		// The token goes to whoever listens there: not in a directory
		// others may write to.
		if err := peerauth.CheckSocketDir("broker socket", path); err != nil {
			return nil, err
		}
		creds = insecure.NewCredentials() // the socket's directory and peer-uid check protect it
	case o.TLS != nil:
		creds = credentials.NewTLS(o.TLS)
	default:
		return nil, errors.New("broker API over TCP needs TLS (client certificate)")
	}
	if o.TokenFile == "" {
		return nil, errors.New("broker API: no token file (broker.api.token_file)")
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(tokenCredentials{path: o.TokenFile}), grpc.WithUnaryInterceptor(traceOut))
	if err != nil {
		return nil, fmt.Errorf("broker API: %w", err)
	}
	return &Client{conn: conn, api: brokerv1.NewBrokerServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Issue implements API.
func (c *Client) Issue(ctx context.Context, req broker.IssueRequest) (broker.Issued, error) {
	r := &brokerv1.IssueHandleRequest{PluginId: req.PluginID, InvocationId: req.InvocationID, Intent: req.Intent,
		DryRun: req.DryRun, Pass: req.Pass, PassIntents: req.PassIntents, Renew: req.Renew,
		RunId: req.RunID, AccessGrantId: req.AccessGrantID, Budget: budgetToProto(req.Budget), Residency: req.Residency,
		OnViolation: req.OnViolation}
	if !req.Deadline.IsZero() {
		r.Deadline = timestamppb.New(req.Deadline)
	}
	for _, d := range req.Destinations {
		r.Destinations = append(r.Destinations, &brokerv1.Destination{Host: d.Host, Port: uint32(d.Port),
			PathPrefix: d.PathPrefix, Methods: d.Methods})
	}
	resp, err := c.api.IssueHandle(ctx, r)
	if err != nil {
		return broker.Issued{}, errorFromStatus(err)
	}
	return broker.Issued{Handle: resp.GetHandle(), ExpiresAt: resp.GetExpiresAt().AsTime(),
		EgressProxy: resp.GetEgressProxy(), Fingerprint: resp.GetFingerprint()}, nil
}

// RevokeInvocation implements API.
func (c *Client) RevokeInvocation(ctx context.Context, id string) (int, error) {
	resp, err := c.api.RevokeInvocation(ctx, &brokerv1.RevokeInvocationRequest{InvocationId: id})
	if err != nil {
		return 0, errorFromStatus(err)
	}
	if resp.GetHandlesOwed() {
		return 0, broker.ErrRevocationOwed
	}
	return int(resp.GetRevoked()), nil
}

// EndInvocation implements InvocationEnder: RevokeInvocation with the
// leases it revoked.
func (c *Client) EndInvocation(ctx context.Context, id string) (broker.InvocationEnd, error) {
	resp, err := c.api.RevokeInvocation(ctx, &brokerv1.RevokeInvocationRequest{InvocationId: id})
	if err != nil {
		return broker.InvocationEnd{}, errorFromStatus(err)
	}
	end := broker.InvocationEnd{Handles: int(resp.GetRevoked()), HandlesOwed: resp.GetHandlesOwed()}
	for _, l := range resp.GetLeases() {
		end.Leases = append(end.Leases, broker.LeaseEnd{Intent: l.GetIntent(), Fingerprint: l.GetFingerprint(), Revoked: l.GetRevoked()})
	}
	return end, nil
}

// RevokePlugin implements API.
func (c *Client) RevokePlugin(ctx context.Context, id string) (int, error) {
	resp, err := c.api.RevokePlugin(ctx, &brokerv1.RevokePluginRequest{PluginId: id})
	if err != nil {
		return 0, errorFromStatus(err)
	}
	return int(resp.GetRevoked()), nil
}

// MintToken implements TokenMinter.
func (c *Client) MintToken(ctx context.Context, req broker.TokenRequest) (broker.Token, error) {
	r := &brokerv1.MintTokenRequest{UserId: req.UserID, ExecutaToolId: req.ExecutaToolID, ToolInvokeId: req.ToolInvokeID,
		MaxTokensPerCall: uint32(req.MaxTokensPerCall), MaxCallsPerInvoke: uint32(req.MaxCallsPerInvoke),
		AppId: req.AppID, AppSlug: req.AppSlug}
	if !req.Deadline.IsZero() {
		r.Deadline = timestamppb.New(req.Deadline)
	}
	switch req.Audience {
	case tokens.AudienceSampling:
		r.Kind = brokerv1.TokenKind_TOKEN_KIND_SAMPLING
	case tokens.AudienceStorage:
		r.Kind = brokerv1.TokenKind_TOKEN_KIND_STORAGE
	}
	resp, err := c.api.MintToken(ctx, r)
	if err != nil {
		return broker.Token{}, errorFromStatus(err)
	}
	return broker.Token{Raw: resp.GetToken(), ExpiresAt: resp.GetExpiresAt().AsTime(), ID: resp.GetJti()}, nil
}

// Status returns the broker's status.
func (c *Client) Status(ctx context.Context) (*brokerv1.StatusResponse, error) {
	resp, err := c.api.Status(ctx, &brokerv1.StatusRequest{})
	if err != nil {
		return nil, errorFromStatus(err)
	}
	return resp, nil
}

// remoteError carries the broker's message and matches its sentinel.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

func errorFromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %v", broker.ErrBrokerUnavailable, err)
	}
	reason, _, _ := strings.Cut(st.Message(), ":")
	if sentinel, ok := broker.ReasonError(reason); ok {
		return &remoteError{msg: "broker: " + st.Message(), err: sentinel}
	}
	switch st.Code() {
	case codes.Unauthenticated:
		return &remoteError{msg: "broker: " + st.Message(), err: broker.ErrUnauthenticated}
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return &remoteError{msg: "broker: " + st.Message(), err: broker.ErrBrokerUnavailable}
	}
	return fmt.Errorf("broker: %s (%s)", st.Message(), st.Code())
}

// Inspect shows the grant behind a handle fingerprint.
func (c *Client) Inspect(ctx context.Context, fingerprint string) (broker.Inspection, error) {
	r, err := c.api.InspectHandle(ctx, &brokerv1.InspectHandleRequest{Fingerprint: fingerprint})
	if err != nil {
		return broker.Inspection{}, errorFromStatus(err)
	}
	g := broker.Grant{PluginID: r.GetPluginId(), InvocationID: r.GetInvocationId(), Intent: r.GetIntent(), Class: broker.Class(r.GetClass()),
		DryRun: r.GetDryRun(), IssuedAt: r.GetIssuedAt().AsTime(), ExpiresAt: r.GetExpiresAt().AsTime(), Fingerprint: r.GetFingerprint(),
		RunID: r.GetRunId(), AccessGrantID: r.GetAccessGrantId(), Budget: budgetFromProto(r.GetBudget()), Residency: r.GetResidency(),
		OnViolation: r.GetOnViolation()}
	for _, d := range r.GetDestinations() {
		g.Destinations = append(g.Destinations, broker.Destination{Host: d.GetHost(), Port: int(d.GetPort()), PathPrefix: d.GetPathPrefix(),
			Methods: d.GetMethods()})
	}
	in := broker.Inspection{Grant: g, Revoked: r.GetRevoked(), Expired: r.GetExpired()}
	if l := r.GetLease(); l != nil {
		in.Lease = &broker.LeaseState{Fingerprint: l.GetFingerprint(), State: l.GetState(), Renewable: l.GetRenewable()}
		if l.GetObtainedAt() != nil {
			in.Lease.ObtainedAt = l.GetObtainedAt().AsTime()
		}
		if l.GetExpiresAt() != nil {
			in.Lease.ExpiresAt = l.GetExpiresAt().AsTime()
		}
	}
	return in, nil
}

// RevokeHandle revokes one handle by fingerprint.
func (c *Client) RevokeHandle(ctx context.Context, fingerprint string) (int, error) {
	r, err := c.api.RevokeHandle(ctx, &brokerv1.RevokeHandleRequest{Fingerprint: fingerprint})
	if err != nil {
		return 0, errorFromStatus(err)
	}
	return int(r.GetRevoked()), nil
}

// Explain asks what the egress proxy would decide for method and url
// under the handle with fingerprint, or under intent.
func (c *Client) Explain(ctx context.Context, fingerprint, intent, method, url string) (broker.Explanation, error) {
	r, err := c.api.Explain(ctx, &brokerv1.ExplainRequest{Fingerprint: fingerprint, Intent: intent, Method: method, Url: url})
	if err != nil {
		return broker.Explanation{}, errorFromStatus(err)
	}
	ex := broker.Explanation{Allowed: r.GetAllowed(), Code: r.GetCode()}
	for _, s := range r.GetSteps() {
		ex.Steps = append(ex.Steps, broker.ExplainStep{Check: s.GetCheck(), OK: s.GetOk(), Detail: s.GetDetail()})
	}
	return ex, nil
}
