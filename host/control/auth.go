package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/tokens"
)

// Authenticator says whether a presented token is the control API's
// (peerauth.Token).
type Authenticator interface {
	Match(presented string) bool
}

// Authentication methods, as host.Principal.Method names them.
const (
	MethodMTLS  = "mtls"
	MethodJWT   = "jwt"
	MethodToken = "token"
	MethodPeer  = "peer"
)

// ControlTokenPrincipal is the principal of host.control_token_file's
// token where the connection names no one better (plain TCP on
// loopback).
const ControlTokenPrincipal = "control-token"

// AuthOptions say how Authenticate names the caller of each request.
// The zero value refuses every request.
type AuthOptions struct {
	// ControlToken is host.control_token_file's token (nil: none). It is
	// a gate shared by every operator, not a name: on the unix socket
	// its caller is the peer's principal, over mutual TLS the
	// certificate's, and only on plain TCP "control-token".
	ControlToken Authenticator
	// Tokens are per-principal token files, read at each request.
	Tokens []TokenFile
	// JWT verifies bearer JWTs of an OIDC issuer (nil: none).
	JWT *JWTVerifier
	// CertID is how a client certificate names its principal; "" is
	// CertIDSPIFFE.
	CertID CertIDFrom
	// Peers names the uids of the unix socket's peers; a uid not in it
	// is "uid:<N>".
	Peers map[int]string
	// RequireBearer: every request presents a bearer (the control token,
	// a principal's token or a JWT) even where the connection names its
	// caller (the unix socket; mutual TLS with a control token file).
	RequireBearer bool
	// Resource, when set, is the OAuth protected resource whose JWTs
	// the control API takes: its metadata is served without
	// authentication at the well-known paths, and a refused request is
	// told where it is (WWW-Authenticate resource_metadata).
	Resource *ProtectedResource
}

// Refusal reasons: why a request was not authenticated. The log line
// names them; the caller sees a 401 with "unauthenticated".
var (
	errNoCredential = errors.New("no token presented: every control API request carries the token of host.control_token_file, " +
		"a principal's own token or a JWT (Authorization: Bearer), or, over mutual TLS, a client certificate")
	errTwoCredentials = errors.New("more than one Authorization header")
	errNotBearer      = errors.New("the Authorization header is not a Bearer credential")
	errUnknownToken   = errors.New("the token presented is not the one in host.control_token_file, nor a principal's token")
	errNoJWT          = errors.New("a JWT was presented but host.control_principals.jwt is not configured")
)

// Authenticate wraps the control API so that every request is made by a
// principal: it names the caller (host.Principal, put in the request's
// context with WithCaller) before any route runs, from the client
// certificate, the unix socket's peer, a principal's token or a JWT.
// Others are answered 401 {"error":"unauthenticated"} before their body
// is read (503 "authentication_unavailable" when the JWT issuer's keys
// cannot be fetched); the log line says why, and echoes nothing the
// caller sent. Every authenticated request is logged with its principal.
// The one exception is AuthOptions.Resource's metadata, public by design
// (RFC 9728): it is served to anyone.
func Authenticate(next http.Handler, o AuthOptions, log *slog.Logger) http.Handler {
	return NewAuth(o).Handler(next, log)
}

// Auth holds the AuthOptions a control API is served with, so that a
// reload swaps them whole: a request is authenticated with one set or
// the other, never a mix. Make it with NewAuth.
type Auth struct{ o atomic.Pointer[AuthOptions] }

// NewAuth returns an Auth serving o.
func NewAuth(o AuthOptions) *Auth {
	a := &Auth{}
	a.o.Store(&o)
	return a
}

// Swap puts o in force for the requests that arrive from now on.
func (a *Auth) Swap(o AuthOptions) { a.o.Store(&o) }

// Handler is Authenticate with a's options at each request.
func (a *Auth) Handler(next http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := a.o.Load()
		if o.Resource != nil && o.Resource.serve(w, r) {
			return
		}
		p, err := o.authenticate(r)
		if err != nil {
			log.Warn("control API: request refused: "+err.Error(), callerAttrs(r)...)
			if o.Resource != nil {
				w.Header().Set("WWW-Authenticate", o.Resource.challenge(r))
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-control"`)
			}
			if errors.Is(err, tokens.ErrKeysUnavailable) {
				peerauth.Refused("control API", "jwks_unavailable")
				w.Header().Set("Retry-After", "5")
				writeError(w, http.StatusServiceUnavailable, "authentication_unavailable",
					"the JWT issuer's keys cannot be fetched; retry later")
				return
			}
			peerauth.Refused("control API", "unauthenticated")
			writeError(w, http.StatusUnauthorized, "unauthenticated", publicDetail(err))
			return
		}
		log.Info("control API request", append(callerAttrs(r), "principal", p.ID, "auth", p.Method,
			"method", r.Method, "path", r.URL.Path)...)
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), p)))
	})
}

// publicDetail is what a refused caller is told: which kind of problem,
// never which principal or key was near.
func publicDetail(err error) string {
	switch {
	case errors.Is(err, errNoCredential):
		return errNoCredential.Error()
	case errors.Is(err, errJWT):
		return "the JWT presented is not valid for this host"
	case errors.Is(err, errUnknownToken):
		return errUnknownToken.Error()
	default:
		return "the credential presented is not valid for this host"
	}
}

func (o AuthOptions) authenticate(r *http.Request) (host.Principal, error) {
	conn, err := o.connPrincipal(r)
	if err != nil {
		return host.Principal{}, err
	}
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) > 1:
		return host.Principal{}, errTwoCredentials
	case len(vals) == 0:
		if conn.ID == "" || o.RequireBearer {
			return host.Principal{}, errNoCredential
		}
		return conn, nil
	}
	bearer, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || bearer == "" {
		return host.Principal{}, errNotBearer
	}
	if o.ControlToken != nil && o.ControlToken.Match(bearer) {
		if conn.ID != "" {
			return conn, nil
		}
		return host.Principal{ID: ControlTokenPrincipal, Method: MethodToken}, nil
	}
	p, ok, problems := matchTokenFiles(o.Tokens, bearer)
	if ok {
		return p, nil
	}
	if looksLikeJWT(bearer) {
		if o.JWT == nil {
			return host.Principal{}, errNoJWT
		}
		return o.JWT.Verify(r.Context(), bearer)
	}
	if problems != nil {
		// Say which token files could not be read: one of them may be
		// the caller's.
		return host.Principal{}, fmt.Errorf("%w (unusable token files: %w)", errUnknownToken, problems)
	}
	return host.Principal{}, errUnknownToken
}

// connPrincipal is who the connection says the caller is: the client
// certificate's principal, or the unix socket peer's; none on plain TCP.
func (o AuthOptions) connPrincipal(r *http.Request) (host.Principal, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return certPrincipal(r.TLS.PeerCertificates[0], o.CertID)
	}
	if peer, ok := r.Context().Value(peerKey{}).(peerauth.Peer); ok {
		return peerPrincipal(peer, o.Peers), nil
	}
	return host.Principal{}, nil
}

type peerKey struct{}

// ConnContext is the control API server's http.Server.ConnContext: it
// records the unix socket's peer (a peerauth.Conn) so that Authenticate
// can name it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerauth.Conn); ok {
		return context.WithValue(ctx, peerKey{}, pc.Peer())
	}
	return ctx
}

// callerAttrs name who sent r in a log line: on the control socket
// RemoteAddr is the peer's "uid=U pid=P" (peerauth.Peer), over TCP its
// address.
func callerAttrs(r *http.Request) []any { return []any{"peer", r.RemoteAddr} }
