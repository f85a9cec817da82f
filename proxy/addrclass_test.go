package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
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

// Every path that dials an upstream records the class of the address it
// dialled, on the audit line and the metric: a request inside a CONNECT
// tunnel, over HTTP/1.1 and over HTTP/2 (a new connection, then a reused
// one), and a WebSocket handshake, plain and tunnelled, allowed or
// refused. A CONNECT's own line judges no address (nothing is dialled
// for it) and is not counted.
func TestAddrClassOnEveryPath(t *testing.T) {
	w := newWSFixtureWith(t, fixtureOpts{reg: prometheus.NewRegistry()}, nil)
	configured := `"addr_class":"` + addrAllowConfigured.String() + `"` // api.example.com is 127.0.0.1, in allow_cidrs

	h1c := w.httpsClient(t, w.issue(t, "api.write", "inv-class-h1"), w.caFile)
	h2c := w.h2Client(t, w.issue(t, "api.write", "inv-class-h2"), w.caFile)
	for i, tc := range []struct {
		c     *http.Client
		proto int
		inv   string
	}{{h1c, 1, "inv-class-h1"}, {h2c, 2, "inv-class-h2"}, {h2c, 2, "inv-class-h2"}} {
		path := "/echo/" + strconv.Itoa(i)
		resp, err := tc.c.Get(w.httpsURL(path))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != tc.proto {
			t.Fatalf("%s: %s %d, want HTTP/%d 200", tc.inv, resp.Proto, resp.StatusCode, tc.proto)
		}
		waitAudit(t, w.fixture, `"msg":"egress"`, `"invocation":"`+tc.inv+`"`, `"mode":"intercept"`, `"path":"`+path+`"`, configured)
	}
	waitAudit(t, w.fixture, `"msg":"egress"`, `"invocation":"inv-class-h1"`, `"mode":"connect"`, `"addr_class":""`)
	for _, scheme := range []string{"ws", "wss"} {
		inv := "inv-class-" + scheme
		c, resp, err := w.dialGo(t, scheme, w.issueWS(t, "api.write", inv))
		if err != nil {
			t.Fatalf("%s: %v (%v)", scheme, err, resp)
		}
		c.CloseNow() //nolint:errcheck // only the handshake is looked at
		waitAudit(t, w.fixture, `"msg":"egress"`, `"invocation":"`+inv+`"`, `"status":101`, configured)
	}
	// The name now resolves to a private address allow_cidrs does not
	// hold: the handshake's dial is refused, and says why.
	w.res.set("api.example.com", "10.0.0.1")
	for _, scheme := range []string{"ws", "wss"} {
		inv := "inv-class-refused-" + scheme
		_, resp, err := w.dialGo(t, scheme, w.issueWS(t, "api.write", inv))
		if err == nil || resp == nil || resp.Header.Get(HeaderError) != CodeAddressNotAllowed {
			t.Fatalf("%s to a private address: err %v, resp %+v", scheme, err, resp)
		}
		waitAudit(t, w.fixture, `"msg":"egress"`, `"invocation":"`+inv+`"`, `"code":"`+CodeAddressNotAllowed+`"`,
			`"addr_class":"`+addrDenySpecialPurpose.String()+`"`)
	}
	for c, want := range map[addrClass]float64{addrAllowConfigured: 5, addrDenySpecialPurpose: 2, addrAllowDefault: 0} {
		if n := testutil.ToFloat64(w.proxy.metrics.addrClasses[c]); n != want {
			t.Errorf("airlock_proxy_upstream_addresses_total{class=%q} = %v, want %v", c, n, want)
		}
	}
}
