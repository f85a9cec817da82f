package proxy

import (
	"net"
	"net/netip"
	"sync"
)

// deniedPrefixes are every entry of the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (as of 2025), plus multicast, so that only ordinary
// public unicast addresses are dialled. Globally reachable special-purpose
// blocks (AS112, AMT, anycast relays) are refused too: no API lives there,
// and refusing costs nothing.
var deniedPrefixes = mustPrefixes(
	// IPv4
	"0.0.0.0/8",          // "this network"; includes 0.0.0.0
	"10.0.0.0/8",         // private
	"100.64.0.0/10",      // shared address space (CGNAT)
	"127.0.0.0/8",        // loopback
	"169.254.0.0/16",     // link-local, incl. 169.254.169.254 (cloud metadata)
	"172.16.0.0/12",      // private
	"192.0.0.0/24",       // IETF protocol assignments (incl. DS-Lite, NAT64 discovery)
	"192.0.2.0/24",       // TEST-NET-1
	"192.31.196.0/24",    // AS112-v4
	"192.52.193.0/24",    // AMT
	"192.88.99.0/24",     // deprecated 6to4 relay anycast
	"192.168.0.0/16",     // private
	"192.175.48.0/24",    // direct delegation AS112
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // TEST-NET-2
	"203.0.113.0/24",     // TEST-NET-3
	"224.0.0.0/4",        // multicast
	"240.0.0.0/4",        // reserved for future use
	"255.255.255.255/32", // limited broadcast
	// IPv6
	"::/128",            // unspecified
	"::1/128",           // loopback
	"::ffff:0:0/96",     // IPv4-mapped: never reached (check unmaps first); kept so the table is whole
	"::/96",             // IPv4-compatible (deprecated)
	"64:ff9b::/96",      // NAT64 well-known prefix
	"64:ff9b:1::/48",    // local-use NAT64
	"100::/64",          // discard-only
	"100:0:0:1::/64",    // dummy prefix
	"2001::/23",         // IETF protocol assignments (Teredo 2001::/32, benchmarking, ORCHID, AMT, AS112)
	"2001:db8::/32",     // documentation
	"2002::/16",         // 6to4
	"2620:4f:8000::/48", // direct delegation AS112
	"3fff::/20",         // documentation
	"5f00::/16",         // segment routing SIDs
	"fc00::/7",          // unique local
	"fe80::/10",         // link-local
	"fec0::/10",         // deprecated site-local
	"ff00::/8",          // multicast
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// addrClass is what the address policy made of an address: allowed by
// default (public unicast), allowed by the operator (allow_cidrs), or
// refused and why. The audit line (addr_class) and the metric
// airlock_proxy_upstream_addresses_total record it, so an operator can
// tell the requests an allow_cidrs exception let through from the rest.
type addrClass uint8

const (
	addrUnknown            addrClass = iota // no address was judged: refused before any dial, or a CONNECT (the requests inside dial)
	addrAllowDefault                        // ordinary public unicast
	addrAllowConfigured                     // in allow_cidrs
	addrDenySpecialPurpose                  // in a special-purpose range (deniedPrefixes)
	addrDenyInvalid                         // invalid, or carrying a zone
	addrDenySelf                            // the proxy's own listener
	numAddrClasses
)

// String is the class as the audit line and the metric's label name it.
func (c addrClass) String() string {
	switch c {
	case addrAllowDefault:
		return "allow.default"
	case addrAllowConfigured:
		return "allow.configured"
	case addrDenySpecialPurpose:
		return "deny.special_purpose"
	case addrDenyInvalid:
		return "deny.invalid"
	case addrDenySelf:
		return "deny.self"
	}
	return ""
}

// allowed reports whether an address of class c may be dialled.
func (c addrClass) allowed() bool { return c == addrAllowDefault || c == addrAllowConfigured }

// classifyAddr classifies a by the special-purpose registries alone
// (allow_cidrs and the proxy's own listeners are the policy's, check):
// addrAllowDefault, or a refusing class and the range that forbids it.
func classifyAddr(a netip.Addr) (addrClass, string) {
	if !a.IsValid() {
		return addrDenyInvalid, "invalid"
	}
	if a.Zone() != "" {
		return addrDenyInvalid, "zoned"
	}
	for _, p := range deniedPrefixes {
		if p.Contains(a) {
			return addrDenySpecialPurpose, p.String()
		}
	}
	return addrAllowDefault, ""
}

// addressPolicy decides whether an address may be dialled.
type addressPolicy struct {
	allow []netip.Prefix // operator exceptions (allow_cidrs); fixed at New

	mu sync.RWMutex // guards selfPorts (listeners come and go)
	// selfPorts are the ports the proxy's listeners (plain, admin, and
	// the plugins' own while they are served) are bound to, each with
	// the number of listeners on it: any address of this machine on one
	// of them is the proxy itself, whatever address the listener is
	// bound to.
	selfPorts map[uint16]int
	// localAddrs lists this machine's addresses; net.InterfaceAddrs when
	// nil. Read at check time (interfaces come and go), and only for a
	// destination on one of selfPorts.
	localAddrs func() []netip.Addr
}

func (p *addressPolicy) addSelf(ap netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.selfPorts == nil {
		p.selfPorts = map[uint16]int{}
	}
	p.selfPorts[ap.Port()]++
}

// removeSelf undoes one addSelf of ap, when the listener on it is no
// longer served.
func (p *addressPolicy) removeSelf(ap netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.selfPorts[ap.Port()] - 1
	if n <= 0 {
		delete(p.selfPorts, ap.Port())
		return
	}
	p.selfPorts[ap.Port()] = n
}

// reasonSelf is check's answer for the proxy's own listener.
const reasonSelf = "proxy's own listener"

// check classifies ap; for a class that refuses it, the reason too. It
// runs once per new upstream connection, not per request.
func (p *addressPolicy) check(ap netip.AddrPort) (addrClass, string) {
	a := ap.Addr().Unmap()
	p.mu.RLock()
	self := p.selfPorts[ap.Port()] > 0
	p.mu.RUnlock()
	if self && p.isLocal(a) {
		return addrDenySelf, reasonSelf
	}
	for _, allowed := range p.allow {
		if allowed.Contains(a) {
			return addrAllowConfigured, ""
		}
	}
	// An IPv4-mapped address (Go's resolver returns /etc/hosts answers
	// this way) is judged as the v4 address it carries, and the reason
	// names that address's range; the dialer connects to the v4 form.
	return classifyAddr(a)
}

// isLocal reports whether a is an address of this machine: loopback,
// unspecified, an interface's address — or a private or link-local
// address, which may be another replica's proxy: a loop all the same.
func (p *addressPolicy) isLocal(a netip.Addr) bool {
	if a.IsLoopback() || a.IsUnspecified() || a.IsPrivate() || a.IsLinkLocalUnicast() {
		return true
	}
	list := p.localAddrs
	if list == nil {
		list = interfaceAddrs
	}
	for _, l := range list() {
		if l.Unmap() == a {
			return true
		}
	}
	return false
}

func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, pfx.Addr())
		}
	}
	return out
}
