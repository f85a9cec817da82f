package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The audit line and the metric tell an address allowed by default (public
// unicast) from one only allow_cidrs lets through, and both from a
// refused one: the same "" stood for both allowed kinds before.
func TestAddrClassAuditedAndCounted(t *testing.T) {
	f := newFixtureWith(t, nil, fixtureOpts{reg: prometheus.NewRegistry()})
	upstream := net.JoinHostPort("127.0.0.1", strconv.Itoa(f.up.port))
	f.proxy.dialer.connect = func(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
		// A public address stands for the loopback upstream: no public
		// address is dialled from a test machine.
		if ap := netip.MustParseAddrPort(addr); ap.Addr() == netip.MustParseAddr("93.184.216.34") {
			addr = upstream
		}
		return nd.DialContext(ctx, network, addr)
	}
	f.res.set("api.example.com", "127.0.0.1")   // allow_cidrs: 127.0.0.0/8
	f.res.set("a.example.org", "93.184.216.34") // public
	f.res.set("c.example.org", "10.0.0.1")      // private, not in allow_cidrs
	h := f.issue(t, "api.read", "inv-addr-class")
	c := f.client(h)
	for _, tc := range []struct {
		host   string
		status int
		class  addrClass
	}{
		{"api.example.com", http.StatusOK, addrAllowConfigured},
		{"a.example.org", http.StatusOK, addrAllowDefault},
		{"c.example.org", http.StatusForbidden, addrDenySpecialPurpose},
	} {
		seen := len(f.audit.String())
		code, errCode, _ := do(t, c, "GET", "http://"+tc.host+":"+strconv.Itoa(f.up.port)+"/x", nil, "")
		if code != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.host, code, errCode, tc.status)
		}
		if got := auditAddrClass(t, f, seen); got != tc.class.String() {
			t.Errorf("%s: audit addr_class %q, want %q", tc.host, got, tc.class)
		}
	}
	for _, c := range []addrClass{addrAllowConfigured, addrAllowDefault, addrDenySpecialPurpose} {
		if n := testutil.ToFloat64(f.proxy.metrics.addrClasses[c]); n != 1 {
			t.Errorf("airlock_proxy_upstream_addresses_total{class=%q} = %v, want 1", c, n)
		}
	}
}

// auditAddrClass is the addr_class of the one egress line written after
// the first seen bytes of f's audit (written once the response is
// relayed: it may come just after the client read it).
func auditAddrClass(t *testing.T, f *fixture, seen int) string {
	t.Helper()
	for limit := time.Now().Add(10 * time.Second); !strings.Contains(f.audit.String()[seen:], `"msg":"egress"`); time.Sleep(time.Millisecond) {
		if time.Now().After(limit) {
			t.Fatal("no audit line")
		}
	}
	b := f.audit.String()[seen:]
	var classes []string
	sc := bufio.NewScanner(strings.NewReader(b))
	for sc.Scan() {
		var line struct {
			Msg       string `json:"msg"`
			AddrClass string `json:"addr_class"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "egress" {
			classes = append(classes, line.AddrClass)
		}
	}
	if len(classes) != 1 {
		t.Fatalf("%d egress lines, want 1:\n%s", len(classes), b)
	}
	return classes[0]
}
