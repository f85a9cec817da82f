// Package hostport checks the host:port addresses a config names (listen
// addresses, a Redis or proxy address) before anything dials or binds:
// a port out of range or a host that is no address or name is a config
// problem, reported at check-config, not a failure at start.
//
// # Security
//
// Errors never quote the address: a secret pasted into the wrong key must
// not end up in a terminal or CI log.
package hostport

import (
	"errors"
	"net"
	"net/netip"
	"regexp"
	"strconv"
)

// Problems an address can have.
var (
	ErrForm = errors.New("must be host:port")
	ErrPort = errors.New("the port must be a number from 0 to 65535")
	ErrHost = errors.New("the host must be an IP address or a DNS name")
	// ErrDialPort: a port to connect to is 1 to 65535 (0 means any free
	// port, which only a listener can take).
	ErrDialPort = errors.New("the port must be a number from 1 to 65535")
)

// dnsName: labels of letters, digits and '-' (and '_', seen in service
// names), not starting or ending with '-'.
var dnsName = regexp.MustCompile(`^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$`)

var allDigits = regexp.MustCompile(`^[0-9.]+$`)

// Listen checks an address to listen on: host may be empty (every
// interface); port 0 means any free port.
func Listen(addr string) error { return check(addr, true) }

// Dial checks an address to connect to: a host is required, port 0 is
// not a port.
func Dial(addr string) error { return check(addr, false) }

func check(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ErrForm
	}
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case !listen && (err != nil || n == 0):
		return ErrDialPort
	case err != nil:
		return ErrPort
	}
	return Host(host, listen)
}

// Host checks the host part of an address; empty is allowed when
// emptyOK.
func Host(host string, emptyOK bool) error {
	if host == "" {
		if emptyOK {
			return nil
		}
		return ErrHost
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	// All digits and dots is an IP address that did not parse
	// (300.1.1.1), not a name.
	if len(host) > 253 || !dnsName.MatchString(host) || allDigits.MatchString(host) {
		return ErrHost
	}
	return nil
}

// URL checks the host and port of an http(s) URL's authority (u.Host):
// a port, when present, from 1 to 65535.
func URL(authority string) error {
	if _, _, err := net.SplitHostPort(authority); err != nil {
		// No port: the host alone.
		h := authority
		if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
			h = h[1 : len(h)-1]
		}
		return Host(h, false)
	}
	return Dial(authority)
}
