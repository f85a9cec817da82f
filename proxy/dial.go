package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"
)

// Resolver looks up a host's addresses. *net.Resolver implements it; tests
// substitute one that answers what they need (for example public, then
// loopback, as a rebinding DNS server would).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// pinnedResolver answers pinned names from a map and the rest from next.
type pinnedResolver struct {
	pins map[string][]netip.Addr
	next Resolver
}

func (p *pinnedResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := p.pins[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return p.next.LookupNetIP(ctx, network, host)
}

// errAddressNotAllowed is returned by the dialer; the proxy answers 403
// (proxy_self_dial when the address is the proxy's own listener).
type errAddressNotAllowed struct {
	class  addrClass
	reason string
}

func (e *errAddressNotAllowed) Error() string { return "address not allowed: " + e.reason }

// dialer resolves and connects, checking every address at connect time
// (net.Dialer.Control sees the exact address being connected), so a DNS
// answer that changes between check and connect cannot pass.
type dialer struct {
	resolver Resolver
	policy   *addressPolicy
	timeout  time.Duration
	// connect dials one checked address; tests replace it so that no
	// public address is ever dialled from a test machine.
	connect func(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error)
}

// dialClassed is the DialContext of the transports that dial out of the
// proxy's sight (HTTP/2, WebSocket): the connection carries its
// address's class, which classOf reads back.
func (d *dialer) dialClassed(ctx context.Context, network, addr string) (net.Conn, error) {
	c, class, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &classedConn{Conn: c, class: class}, nil
}

// classedConn is a dialled connection with its address's class.
type classedConn struct {
	net.Conn
	class addrClass
}

// classOf is the class of the address c (a dialClassed connection, or
// TLS over one) was dialled to; addrUnknown for any other.
func classOf(c net.Conn) addrClass {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*classedConn); ok {
		return cc.class
	}
	return addrUnknown
}

// dial connects to addr and returns the class of the address it
// connected to (allow.default or allow.configured).
func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, addrClass, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, addrUnknown, err
	}
	port, err := net.LookupPort(network, portStr)
	if err != nil {
		return nil, addrUnknown, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = d.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, addrUnknown, err
	}
	nd := &net.Dialer{Timeout: d.timeout, KeepAlive: 30 * time.Second, Control: d.control}
	var firstErr error
	for _, a := range addrs {
		// IPv4-mapped answers are v4 addresses: checked and dialled as v4.
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		class, reason := d.policy.check(ap)
		if !class.allowed() {
			if firstErr == nil {
				firstErr = &errAddressNotAllowed{class: class, reason: reason}
			}
			continue
		}
		connect := d.connect
		if connect == nil {
			connect = func(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
				return nd.DialContext(ctx, network, addr)
			}
		}
		c, err := connect(ctx, nd, network, ap.String())
		if err == nil {
			return c, class, nil
		}
		if firstErr == nil || isNotAllowed(firstErr) && !isNotAllowed(err) {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no address for host")
	}
	return nil, addrUnknown, firstErr
}

// control re-checks the literal address right before connect(2).
func (d *dialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &errAddressNotAllowed{class: addrDenyInvalid, reason: "unparseable address"}
	}
	if class, reason := d.policy.check(ap); !class.allowed() {
		return &errAddressNotAllowed{class: class, reason: reason}
	}
	return nil
}

func isNotAllowed(err error) bool {
	var na *errAddressNotAllowed
	return errors.As(err, &na)
}

// newTLSConfig builds the upstream TLS configuration: the system roots
// plus caFile, TLS >= 1.2. The proxy never reads HTTPS_PROXY from the
// environment and never follows redirects (its upstream client has
// neither notion).
func newTLSConfig(c Config) (*tls.Config, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if c.UpstreamCAFile != "" {
		pem, err := os.ReadFile(c.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("proxy.upstream_ca_file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, errors.New("proxy.upstream_ca_file: no PEM certificate in it")
		}
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
