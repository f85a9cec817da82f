package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// CONNECT with TLS interception. A CONNECT is attributed before anything
// else: its Proxy-Authorization must carry a live handle, or the plugin
// pass the host put in HTTPS_PROXY, whose grant declares the CONNECT host
// and port, or it is refused before any TLS and no certificate is minted. Then the proxy answers 200, terminates the
// plugin's TLS with a leaf for that host alone, and serves the HTTP/1.1
// requests inside the tunnel with the same client loop as plain requests:
// each is turned into the absolute-form request it stands for and goes
// through every check, the injection, the echo guard, the limits and the
// audit, with its handle resolved again (a handle revoked or expired
// mid-tunnel stops the next request). ALPN offers "h2" and "http/1.1";
// HTTP/2 streams take the same path one by one (h2.go).

// tunnel is what a CONNECT established for the requests inside it.
type tunnel struct {
	host string // normalized
	port int
	// handle is the CONNECT's handle, used by requests inside that carry
	// none of their own; "" when a plugin pass opened the tunnel (each
	// request must then carry its handle, e.g. as a placeholder).
	handle string
	// cred is what the CONNECT carried (handle or pass); the tunnel's
	// long-lived streams end when it is revoked.
	cred string
	// Computed once per tunnel, not per request inside it: the port as
	// text, the authority requests are sent to, the handle's header.
	portText, authority, bearer string
}

func newTunnel(host string, port int, handle, cred string) *tunnel {
	t := &tunnel{host: host, port: port, handle: handle, cred: cred, portText: strconv.Itoa(port), authority: host}
	if port != 443 {
		t.authority = net.JoinHostPort(host, t.portText)
	}
	if handle != "" {
		t.bearer = "Bearer " + handle
	}
	return t
}

var errSNIMismatch = errors.New("TLS server name differs from the CONNECT host")

// connect handles a CONNECT when interception is configured.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	a := &auditRecord{start: time.Now(), Plugin: connPlugin(r.Context()), Method: r.Method, Host: r.Host, Mode: modeConnect}
	c := h1.ConnOf(w)
	if c == nil {
		s.answer(w, r, a, deny(CodeConnectNotAllowed, "CONNECT is not supported on this listener"))
		return
	}
	t, d := s.admitConnect(r, a)
	if d != nil {
		s.answer(w, r, a, d)
		return
	}
	a.Status = http.StatusOK
	s.finish(a, nil)
	conn, brw := c.Hijack()
	if _, err := brw.WriteString("HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil || brw.Flush() != nil {
		return
	}
	s.serveTunnel(c, &bufferedConn{Conn: conn, r: brw.Reader}, t)
}

// admitConnect checks a CONNECT: host:port form, not port 80 (plain
// HTTP goes as absolute-form requests), a live handle, and a grant that
// declares the host and port.
func (s *Server) admitConnect(r *http.Request, a *auditRecord) (*tunnel, *denial) {
	host, d := s.admitPlace(r, a)
	if d != nil {
		return nil, d
	}
	port := a.Port
	handle, ok := extractHandle(r)
	if !ok {
		return nil, deny(CodeHandleMissing, "no credential handle on the CONNECT: put it in the proxy URL (HTTPS_PROXY=http://<handle>@proxy) or Proxy-Authorization")
	}
	g, in, d := s.attribute(r.Context(), handle, a)
	if d != nil {
		return nil, d
	}
	if !declaresPlace(g.Destinations, host, port) {
		return nil, deny(CodeDestination, "the CONNECT host and port are not declared for this handle; \"declared\" lists its destinations").withDeclared(g.Destinations)
	}
	if len(in.Destinations) > 0 && !declaresPlace(in.Destinations, host, port) {
		return nil, deny(CodeDestination, "the CONNECT host and port are not declared for this handle")
	}
	cred := handle
	if g.Pass {
		handle = ""
	}
	return newTunnel(host, port, handle, cred), nil
}

// admitPlace checks a CONNECT's target: host:port form, not port 80
// (plain HTTP goes as absolute-form requests), a DNS name within the
// permitted domains. It names the target in a.
func (s *Server) admitPlace(r *http.Request, a *auditRecord) (string, *denial) {
	hh, hp, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(hp)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		return "", deny(CodeBadRequest, "the CONNECT target must be host:port")
	}
	if port == 80 {
		return "", deny(CodeBadRequest, "CONNECT to port 80: send plain http:// requests through the proxy instead")
	}
	host, err := normalizeHost(hh)
	if err != nil {
		return "", deny(CodeBadRequest, "the CONNECT target's host is not a valid DNS name")
	}
	a.Host, a.Port = host, port
	if pd := s.cfg.Intercept.PermittedDomains; len(pd) > 0 && !slices.ContainsFunc(pd, func(d string) bool { return host == d || strings.HasSuffix(host, "."+d) }) {
		return "", deny(CodeDestination, "the CONNECT host is outside the intercept CA's permitted domains")
	}
	return host, nil
}

// serveTunnel terminates the plugin's TLS on raw, the connection c's
// CONNECT took over, and serves the requests inside it until the tunnel
// closes.
func (s *Server) serveTunnel(c *h1.Conn, raw net.Conn, t *tunnel) {
	tc := tls.Server(raw, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hi.ServerName != "" {
				if sn, err := normalizeHost(hi.ServerName); err != nil || sn != t.host {
					return nil, errSNIMismatch
				}
			}
			return s.ca.Load().leaf(t.host)
		},
	})
	readHeaderTimeout, _ := c.Timeouts()
	_ = raw.SetDeadline(time.Now().Add(readHeaderTimeout))
	ctx, cancel := context.WithTimeout(c.Context(), readHeaderTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	_ = raw.SetDeadline(time.Time{})
	if err != nil {
		s.log.Debug("proxy: TLS handshake inside a CONNECT tunnel failed", "error", err.Error())
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		s.serveH2(c, t, tc)
		return
	}
	ctx = context.WithValue(c.Context(), tunnelKey{}, t)
	c.ServeInner(tc, ctx, func(req *http.Request) *http.Response {
		if d := t.adopt(req); d != nil {
			return s.refuseWith(&auditRecord{start: time.Now(), Plugin: connPlugin(ctx), Method: req.Method, Host: t.host, Port: t.port,
				Mode: modeIntercept}, d, 0)
		}
		return nil
	})
}

// adopt turns a request read inside the tunnel into the absolute-form
// request it stands for. Its Host must name the CONNECT target; a
// request without its own handle uses the CONNECT's.
func (t *tunnel) adopt(req *http.Request) *denial {
	if req.Method == http.MethodConnect {
		return deny(CodeBadRequest, "CONNECT inside a CONNECT tunnel")
	}
	if req.URL.IsAbs() || req.URL.Host != "" {
		return deny(CodeBadRequest, "requests inside a CONNECT tunnel must be origin-form (GET /path)")
	}
	hh, hp, err := splitHostPortDefault(req.Host)
	nh, nerr := normalizeHost(hh)
	if err != nil || nerr != nil || nh != t.host || !(hp == "" && t.port == 443 || hp == t.portText) {
		return deny(CodeHostMismatch, "the Host header inside the tunnel differs from the CONNECT target")
	}
	// The request's own URL is rewritten in place: ReadRequest made it for
	// this request alone.
	req.URL.Scheme, req.URL.Host = "http", t.authority
	req.Host = t.authority
	if t.bearer != "" && req.Header.Get("Proxy-Authorization") == "" {
		req.Header["Proxy-Authorization"] = []string{t.bearer}
	}
	return nil
}

// bufferedConn reads through the client loop's reader first, so bytes
// the client sent right after its CONNECT (the TLS ClientHello) are not
// lost.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
