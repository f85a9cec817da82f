package proxy

import (
	"net/netip"
	"testing"
)

// TestClassifyAddr: every special-purpose range is refused; ordinary
// public addresses (the controls) are not.
func TestClassifyAddr(t *testing.T) {
	denied := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.255.255.254",
		"169.254.0.1", "169.254.169.254", "172.16.0.1", "172.31.255.254", "192.0.0.1", "192.0.0.9", "192.0.0.170",
		"192.0.2.1", "192.31.196.1", "192.52.193.1", "192.88.99.1", "192.168.0.1", "192.168.255.255", "192.175.48.1",
		"198.18.0.1", "198.19.255.254", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1",
		"255.255.255.254", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::1",
		"100::1", "100:0:0:1::1", "2001::1", "2001:0:4136:e378::1", "2001:2::1", "2001:10::1", "2001:20::1", "2001:db8::1",
		"2002:7f00:1::1", "2002:808:808::1", "2620:4f:8000::1", "3fff::1", "5f00::1", "fc00::1", "fd12:3456::1",
		"fe80::1", "febf::1", "fec0::1", "ff02::1", "ff0e::1",
	}
	for _, s := range denied {
		if class, reason := classifyAddr(netip.MustParseAddr(s)); class != addrDenySpecialPurpose || reason == "" {
			t.Errorf("%s: %s %q, want %s and a range", s, class, reason, addrDenySpecialPurpose)
		}
	}
	public := []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "11.0.0.1", "100.63.255.255", "100.128.0.1", "172.15.255.255",
		"172.32.0.1", "192.0.1.1", "192.169.0.1", "198.17.255.255", "198.20.0.1", "223.255.255.255",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001:80b::200e", "2001:200::1"}
	for _, s := range public {
		if class, reason := classifyAddr(netip.MustParseAddr(s)); class != addrAllowDefault || reason != "" {
			t.Errorf("%s: %s %q, want %s", s, class, reason, addrAllowDefault)
		}
	}
	if class, _ := classifyAddr(netip.MustParseAddr("fe80::1%eth0")); class != addrDenyInvalid {
		t.Errorf("zoned address: %s, want %s", class, addrDenyInvalid)
	}
}

func TestAddressPolicy(t *testing.T) {
	p := &addressPolicy{allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		selfPorts: map[uint16]int{8899: 1, 9464: 1}}
	// Each class distinct: an allow_cidrs exception is not a default
	// allow (the audit line and the metric tell them apart).
	for ap, want := range map[string]addrClass{
		"127.0.0.1:443":          addrAllowConfigured,    // allowed by allow_cidrs
		"[::ffff:127.0.0.1]:443": addrAllowConfigured,    // the same address, mapped
		"127.0.0.1:8899":         addrDenySelf,           // the proxy itself, even when allowed
		"127.0.0.1:9464":         addrDenySelf,           // a listener on 0.0.0.0:9464
		"10.0.0.1:443":           addrDenySpecialPurpose, // not in allow_cidrs
		"[::1]:443":              addrDenySpecialPurpose,
		"8.8.8.8:443":            addrAllowDefault,
	} {
		got, reason := p.check(netip.MustParseAddrPort(ap))
		if got != want || got.allowed() != (reason == "") {
			t.Errorf("%s: %s %q, want %s", ap, got, reason, want)
		}
	}
	d := &dialer{policy: &addressPolicy{}}
	if err := d.control("tcp4", "127.0.0.1:443", nil); !isNotAllowed(err) {
		t.Fatalf("control let loopback through: %v", err)
	}
	if err := d.control("tcp4", "8.8.8.8:443", nil); err != nil {
		t.Fatalf("control refused a public address: %v", err)
	}
}

// Go's resolver returns /etc/hosts answers as IPv4-mapped addresses: a
// public one is allowed and a private one refused, with the reason naming
// the v4 range, the same as its unmapped form (allow_cidrs included).
func TestMappedAddressJudgedAsV4(t *testing.T) {
	p := &addressPolicy{allow: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	for ap, want := range map[string]string{
		"[::ffff:93.184.216.34]:443":  "",
		"93.184.216.34:443":           "",
		"[::ffff:10.0.0.1]:443":       "10.0.0.0/8",
		"10.0.0.1:443":                "10.0.0.0/8",
		"[::ffff:169.254.169.254]:80": "169.254.0.0/16",
		"[::ffff:192.0.2.7]:443":      "", // allow_cidrs, mapped or not
		"192.0.2.7:443":               "",
	} {
		if _, got := p.check(netip.MustParseAddrPort(ap)); got != want {
			t.Errorf("%s: %q, want %q", ap, got, want)
		}
	}
}
