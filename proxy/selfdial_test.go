package proxy

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// Any address of this machine on one of the proxy's ports is the proxy
// itself, whatever address its listener is bound to: a public interface
// address, another loopback address, the unspecified address.
func TestSelfDialPolicy(t *testing.T) {
	p := &addressPolicy{allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		localAddrs: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("8.8.4.4")} }}
	p.addSelf(netip.MustParseAddrPort("127.0.0.1:8899")) // a listener on one address
	p.addSelf(netip.MustParseAddrPort("0.0.0.0:9464"))   // and one on all
	for ap, want := range map[string]string{
		"8.8.4.4:8899":           reasonSelf, // this machine's public address
		"[::ffff:8.8.4.4]:9464":  reasonSelf,
		"127.0.0.2:8899":         reasonSelf, // another loopback address
		"0.0.0.0:8899":           reasonSelf,
		"8.8.4.4:443":            "", // this machine, another port
		"8.8.8.8:8899":           "", // another machine's public address
		"127.0.0.1:443":          "",
		"[::ffff:127.0.0.1]:443": "",
	} {
		if _, got := p.check(netip.MustParseAddrPort(ap)); got != want {
			t.Errorf("%s: %q, want %q", ap, got, want)
		}
	}
}

// A destination that resolves to this machine on the proxy's own port,
// plain or admin, is refused with proxy_self_dial at dial time; nothing
// connects (before, 127.0.0.2 on the proxy's port, or this machine's
// interface address, were dialled when allow_cidrs covered them).
func TestSelfDialRefused(t *testing.T) {
	addrs := []string{"127.0.0.2"}
	for _, a := range interfaceAddrs() {
		if a.Is4() && !a.IsLoopback() {
			addrs = append(addrs, a.String())
			break
		}
	}
	f := newFixture(t, func(c *Config) { c.AllowCIDRs = append(c.AllowCIDRs, "0.0.0.0/0") })
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	f.proxy.AddSelf(admin.Addr())
	var connects int
	f.proxy.dialer.connect = func(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
		connects++
		return nd.DialContext(ctx, network, addr)
	}
	_, proxyPort, _ := net.SplitHostPort(f.addr)
	_, adminPort, _ := net.SplitHostPort(admin.Addr().String())
	for _, a := range addrs {
		for _, port := range []string{proxyPort, adminPort} {
			f.res.set("self.example.org", a)
			n, _ := strconv.Atoi(port)
			iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-self-" + a + port,
				Intent: "api.write", Destinations: []broker.Destination{{Host: "self.example.org", Port: n}}, Deadline: time.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			status, code, body := do(t, f.client(iss.Handle), http.MethodGet, "http://self.example.org:"+port+"/x", nil, "")
			if status != http.StatusForbidden || code != CodeSelfDial {
				t.Errorf("%s:%s: %d %q %s", a, port, status, code, body)
			}
		}
	}
	if connects != 0 {
		t.Fatalf("%d connects to the proxy itself", connects)
	}
}
