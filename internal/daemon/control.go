package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/host/control"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/writedeadline"
)

// listenControl opens host.control and returns the handler wrapped in its
// authority: a unix socket whose peers are checked by uid, or TCP with
// mutual TLS; and control.Authenticate, which names every request's
// principal and, whenever host.control_token_file is set (always for a
// unix socket), requires a bearer of each request. The server must use
// control.ConnContext (it records the socket's peer).
func listenControl(c config.Host, handler http.Handler, log *slog.Logger) (net.Listener, http.Handler, error) {
	l, h, _, err := listenControlAuth(c, handler, log)
	return l, h, err
}

// listenControlAuth is listenControl that also returns the control API's
// Auth, for a reload to swap (reloadControlPrincipals).
func listenControlAuth(c config.Host, handler http.Handler, log *slog.Logger) (net.Listener, http.Handler, *control.Auth, error) {
	c = c.WithControlDefaults()
	var l net.Listener
	if path, ok := c.ControlSocket(); ok {
		uids, err := peerauth.LookupUIDs(c.ControlAllowedUsers)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("host.control_allowed_users: %w", err)
		}
		if l, err = peerauth.ListenUnix(path, peerauth.UnixOptions{Name: "control socket",
			AllowedUIDs: append(append([]int(nil), c.ControlAllowedUIDs...), uids...), GID: peerauth.NoGroup, Log: log}); err != nil {
			return nil, nil, nil, err
		}
	} else {
		if c.ControlTLS == nil && c.ControlTokenFile == "" && len(c.ControlPrincipals.Tokens) == 0 && c.ControlPrincipals.JWT == nil {
			// Validate says so too; a caller that skipped it must not
			// get an open port.
			return nil, nil, nil, errors.New("host.control: a TCP control API needs host.control_tls, host.control_token_file or host.control_principals")
		}
		var err error
		if l, err = net.Listen("tcp", c.Control); err != nil {
			return nil, nil, nil, err
		}
		if t := c.ControlTLS; t != nil {
			tc, err := peerauth.MutualTLS("host.control_tls", t.CertFile, t.KeyFile, t.ClientCAFile)
			if err != nil {
				l.Close()
				return nil, nil, nil, err
			}
			l = tls.NewListener(l, tc)
		}
	}
	auth, err := controlAuth(c, l.Addr())
	if err != nil {
		l.Close()
		return nil, nil, nil, err
	}
	if _, why := mcpResource(c, l.Addr()); why != nil {
		log.Warn("MCP endpoint: no OAuth discovery: " + why.Error())
	}
	a := control.NewAuth(auth)
	// The write timeout bounds what is written and read for a request
	// refused before any route too (the handlers inside bound their
	// own, with their own timeouts).
	return l, writedeadline.Handler(writedeadline.Bound(c.ControlWriteTimeout), a.Handler(handler, log)), a, nil
}

// reloadControlPrincipals puts next into force for the control API's
// requests from now on (a SIGHUP): principals' token files, peers' names
// and the JWT issuer. The running listener, TLS and control token stay;
// on an error nothing changes.
// addr is the listener's address (for the MCP endpoint's OAuth
// discovery).
func reloadControlPrincipals(a *control.Auth, running config.Host, next config.ControlPrincipals, addr net.Addr) error {
	running = running.WithControlDefaults()
	running.ControlPrincipals = next
	o, err := controlAuth(running, addr)
	if err != nil {
		return err
	}
	a.Swap(o)
	return nil
}

// controlAuth turns the host's control settings into how the control API
// names its callers: the control token (required of every request when
// set), principals' token files, names of the socket's uids, an OIDC
// issuer, and how a client certificate names its principal; and, for
// the MCP endpoint, the OAuth discovery of that issuer (mcpResource;
// addr is the listener's address).
func controlAuth(c config.Host, addr net.Addr) (control.AuthOptions, error) {
	o := control.AuthOptions{RequireBearer: c.ControlTokenFile != ""}
	if c.ControlTokenFile != "" {
		tok, err := peerauth.EnsureToken("host.control_token_file", c.ControlTokenFile, peerauth.NoGroup)
		if err != nil {
			return o, err
		}
		o.ControlToken = tok
	}
	if c.ControlTLS != nil {
		o.CertID = control.CertIDFrom(c.ControlTLS.IDFrom)
	}
	p := c.ControlPrincipals
	for _, t := range p.Tokens {
		o.Tokens = append(o.Tokens, control.TokenFile{Principal: t.Principal, File: t.File})
	}
	for i, pe := range p.Peers {
		uid := pe.UID
		if uid == nil {
			uids, err := peerauth.LookupUIDs([]string{pe.User})
			if err != nil {
				return o, fmt.Errorf("host.control_principals.peers[%d].user: %w", i, err)
			}
			uid = &uids[0]
		}
		if o.Peers == nil {
			o.Peers = map[int]string{}
		}
		o.Peers[*uid] = pe.Principal
	}
	if j := p.JWT; j != nil {
		keys, err := control.NewJWKS(control.JWKSOptions{URL: j.JWKSURL, File: j.JWKSFile})
		if err != nil {
			return o, fmt.Errorf("host.control_principals.jwt: %w", err)
		}
		// The keys are fetched at the first JWT, not here: the host
		// starts while its issuer is down, and JWTs wait for it (503).
		v, err := control.NewJWTVerifier(control.JWTOptions{Issuer: j.Issuer, Audience: j.Audience, Keys: keys,
			PrincipalClaim: j.PrincipalClaim, Attributes: j.Attributes, Leeway: j.Leeway})
		if err != nil {
			return o, fmt.Errorf("host.control_principals.jwt: %w", err)
		}
		o.JWT = v
		o.Resource, _ = mcpResource(c, addr)
	}
	return o, nil
}

// mcpResource is the MCP endpoint as an OAuth protected resource (RFC
// 9728) of the control API's JWT issuer, when both are on: identified by
// host.mcp.resource_url, or else by the listener's own address (https
// with host.control_tls) — never by a request's Host header, which the
// client chooses: a host that believed it would advertise whatever
// resource a client named, and tokens for it. Nil, and why, when the
// address names no one host: all interfaces, or a unix socket.
func mcpResource(c config.Host, addr net.Addr) (*control.ProtectedResource, error) {
	j := c.ControlPrincipals.JWT
	if !c.MCP.Enabled || j == nil {
		return nil, nil
	}
	resource := c.MCP.ResourceURL
	if resource == "" {
		tcp, ok := addr.(*net.TCPAddr)
		if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
			return nil, errors.New("the control API listens on all interfaces or a unix socket, so its URL is unknown: set host.mcp.resource_url")
		}
		scheme := "http"
		if c.ControlTLS != nil {
			scheme = "https"
		}
		resource = scheme + "://" + net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port)) + hostmcp.Path
	}
	res, err := control.NewProtectedResource(resource, []string{j.Issuer}, c.MCP.Scopes)
	if err != nil {
		return nil, fmt.Errorf("%w: set host.mcp.resource_url", err)
	}
	return res, nil
}

// reloadPrincipals applies next's host.control_principals when they
// changed, and returns the config now in force (cfg on an error, when
// nothing changed).
func (n *hostNode) reloadPrincipals(cfg, next *config.Config) (*config.Config, error) {
	if n.controlAuth == nil || reflect.DeepEqual(cfg.Host.ControlPrincipals, next.Host.ControlPrincipals) {
		return cfg, nil
	}
	if err := reloadControlPrincipals(n.controlAuth, cfg.Host, next.Host.ControlPrincipals, n.controlAddr); err != nil {
		return cfg, err
	}
	cur := *cfg
	cur.Host.ControlPrincipals = next.Host.ControlPrincipals
	n.log.Info("control API principals reloaded", "tokens", len(next.Host.ControlPrincipals.Tokens),
		"peers", len(next.Host.ControlPrincipals.Peers), "jwt", next.Host.ControlPrincipals.JWT != nil)
	return &cur, nil
}

// controlServer is the control API's HTTP server: ConnContext records
// the unix socket's peer for Authenticate. A kept-alive connection with
// no request is closed after ControlIdleTimeout; a request's own stream
// (an invocation's answer, an MCP session's) is not idle.
func controlServer(handler http.Handler) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: ControlIdleTimeout,
		ConnContext: control.ConnContext}
}

// ControlIdleTimeout closes a control API connection that carries no
// request for this long.
const ControlIdleTimeout = 2 * time.Minute

// ControlClientOptions say how a client authenticates to the control API.
type ControlClientOptions struct {
	// TokenFile holds the control token (host.control_token_file), read
	// at each request; none is sent when empty.
	TokenFile string
	// TLS is the client side of host.control_tls (https:// addresses).
	TLS *tls.Config
}

// ControlClient returns a client and base URL for a control address:
// unix:/path, http(s)://host:port or host:port. Every request carries the
// token of o.TokenFile.
func ControlClient(addr string, o ControlClientOptions) (*http.Client, string) {
	tr := &http.Transport{TLSClientConfig: o.TLS}
	base := strings.TrimSuffix(addr, "/")
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			// The control token goes to whoever listens there.
			if err := peerauth.CheckSocketDir("control socket", path); err != nil {
				return nil, err
			}
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
		base = "http://airlock"
	} else if !strings.Contains(addr, "://") {
		base = "http://" + base
		if o.TLS != nil {
			base = "https://" + strings.TrimSuffix(addr, "/")
		}
	}
	var rt http.RoundTripper = tr
	if o.TokenFile != "" {
		rt = bearerTransport{next: tr, tokenFile: o.TokenFile}
	}
	return &http.Client{Transport: rt}, base
}

// bearerTransport presents the control token, read from its file at each
// request (the host creates it anew when it was removed).
type bearerTransport struct {
	next      http.RoundTripper
	tokenFile string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := peerauth.ReadToken("host.control_token_file", b.tokenFile)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(r)
}
