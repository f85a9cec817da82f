package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// ssrfFixture is a proxy with no allow_cidrs (the production default),
// whose handles may use target.example.com and api.example.com, and whose
// dialer never reaches a public address from the test machine.
func ssrfFixture(t *testing.T) (*fixture, string, *[]string) {
	f := newFixture(t, func(c *Config) { c.AllowCIDRs = nil })
	var mu sync.Mutex
	var publicDials []string
	f.proxy.dialer.connect = func(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
		ap := netip.MustParseAddrPort(addr)
		if class, _ := classifyAddr(ap.Addr()); class == addrAllowDefault {
			mu.Lock()
			publicDials = append(publicDials, addr)
			mu.Unlock()
			return nil, errors.New("test: public addresses are not dialled")
		}
		return nd.DialContext(ctx, network, addr) // Control refuses it
	}
	iss, err := f.b.Issue(context.Background(), brokerReq("inv-ssrf", f.up.port, 60e9))
	if err != nil {
		t.Fatal(err)
	}
	return f, iss.Handle, &publicDials
}

// Each name resolves to a special-purpose address: refused at dial time.
func TestSSRFResolvedAddresses(t *testing.T) {
	f, h, _ := ssrfFixture(t)
	addrs := []string{
		"127.0.0.1", "127.255.255.254", "0.0.0.0", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254",
		"192.168.1.1", "100.64.0.1", "100.127.255.254", "169.254.169.254", "169.254.0.1", "192.0.0.1", "192.0.0.170",
		"192.0.2.1", "198.18.0.1", "198.19.255.254", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255", "192.88.99.1",
		"::1", "::", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b:1::1",
		"2002:7f00:1::1", "2001:0:4136:e378::1", "2001:db8::1", "fc00::1", "fd12:3456::1", "fe80::1", "fec0::1",
		"ff02::1", "100::1", "3fff::1", "5f00::1",
	}
	for _, a := range addrs {
		t.Run(a, func(t *testing.T) {
			f.res.set("api.example.com", a)
			n := f.up.count()
			code, errCode, _ := do(t, f.client(h), "GET", f.url("/x"), nil, "")
			if code != http.StatusForbidden || errCode != CodeAddressNotAllowed {
				t.Fatalf("got %d %q, want 403 %s", code, errCode, CodeAddressNotAllowed)
			}
			if f.up.count() != n {
				t.Fatal("the request reached the loopback upstream")
			}
		})
	}
}

// Literal and oddly spelled addresses never match a declared DNS name.
func TestSSRFLiteralsAndSpellings(t *testing.T) {
	f, h, _ := ssrfFixture(t)
	for _, host := range []string{
		"127.0.0.1", "2130706433", "0x7f000001", "017700000001", "127.1", "0", "[::1]", "[::ffff:127.0.0.1]",
		"[fe80::1%25eth0]", "localhost", "169.254.169.254", "metadata.google.internal", "xn--pi-7kc.example.com",
	} {
		t.Run(host, func(t *testing.T) {
			u := "http://" + host + ":" + itoa(f.up.port) + "/x"
			code, errCode, _ := do(t, f.client(h), "GET", u, nil, "")
			if code != http.StatusForbidden || errCode != CodeDestination {
				t.Fatalf("got %d %q, want 403 %s", code, errCode, CodeDestination)
			}
		})
	}
}

// An IDN homograph (Cyrillic "а" in "аpi") is a different name.
func TestSSRFHomograph(t *testing.T) {
	f, h, _ := ssrfFixture(t)
	code, errCode, _ := do(t, f.client(h), "GET", "http://\u0430pi.example.com:"+itoa(f.up.port)+"/x", nil, "")
	if code != http.StatusForbidden || errCode != CodeDestination {
		t.Fatalf("homograph: %d %q", code, errCode)
	}
}

// A DNS server that answers a public address first and loopback after (or
// both at once) cannot get the proxy to connect to loopback: every address
// is checked as it is connected.
func TestSSRFRebinding(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(call int) []netip.Addr
	}{
		{"public then loopback", func(call int) []netip.Addr {
			if call == 1 {
				return []netip.Addr{netip.MustParseAddr("93.184.216.34")}
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}},
		{"public and loopback in one answer", func(int) []netip.Addr {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, h, public := ssrfFixture(t)
			f.res.answer = func(host string, call int) []netip.Addr {
				if host == "api.example.com" {
					return tt.answer(call)
				}
				return nil
			}
			n := f.up.count()
			for i := 0; i < 3; i++ {
				code, errCode, _ := do(t, f.client(h), "GET", f.url("/x"), nil, "")
				if code == http.StatusOK || f.up.count() != n {
					t.Fatalf("attempt %d reached the loopback upstream (%d %s)", i, code, errCode)
				}
				if code != http.StatusForbidden && code != http.StatusBadGateway {
					t.Fatalf("attempt %d: %d %s", i, code, errCode)
				}
			}
			if len(*public) == 0 {
				t.Fatal("the public answer was never tried")
			}
		})
	}
}

// Raw request lines a client library would not send.
func TestSSRFRawRequests(t *testing.T) {
	f, h, _ := ssrfFixture(t)
	port := itoa(f.up.port)
	for _, tt := range []struct {
		name, line, want string
		status           int
	}{
		{"userinfo in target", "GET http://user:pw@api.example.com:" + port + "/x HTTP/1.1", CodeUserinfo, 400},
		{"https target", "GET https://api.example.com:" + port + "/x HTTP/1.1", CodeSchemeNotAllowed, 400},
		{"ftp target", "GET ftp://api.example.com/x HTTP/1.1", CodeSchemeNotAllowed, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, f)
			rc.send(tt.line + "\r\nHost: api.example.com:" + port + "\r\nProxy-Authorization: Bearer " + h + "\r\n\r\n")
			resp, _ := rc.response("GET")
			if resp.StatusCode != tt.status || resp.Header.Get(HeaderError) != tt.want {
				t.Fatalf("got %d %q, want %d %s", resp.StatusCode, resp.Header.Get(HeaderError), tt.status, tt.want)
			}
		})
	}
}

// A secret holding CR/LF never splits a header; a header value with a NUL
// is refused by the server before the proxy sees it.
func TestSSRFHeaderInjection(t *testing.T) {
	f := newFixture(t, nil)
	f.writeSecret(t, "abc\r\nX-Evil: 1")
	h := f.issue(t, "api.write", "inv-crlf")
	n := f.up.count()
	code, errCode, _ := do(t, f.client(h), "GET", f.url("/x"), nil, "")
	if code != http.StatusBadGateway || errCode != CodeSecretInvalid || f.up.count() != n {
		t.Fatalf("CR/LF secret: %d %q", code, errCode)
	}
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: api.example.com\r\nX-A: a\x00b\r\nProxy-Authorization: Bearer %s\r\n\r\n", f.url("/x"), h)
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "400") || f.up.count() != n {
		t.Fatalf("NUL in a header: %q", line)
	}
}
