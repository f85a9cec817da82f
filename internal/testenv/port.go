//go:build linux

package testenv

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr is a loopback address ("127.0.0.1:PORT") that was free a
// moment ago, for a server a test configures by address. See freePort.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	return loopback(port)
}

// freePort returns a loopback port that was free a moment ago. It picks
// one below the kernel's ephemeral range when there is room there: a port
// from the range (what listening on port 0 hands out) can be taken by any
// outgoing connection or port-0 listener of the test packages running at
// the same time, between this check and the server's bind; a port below
// it only by another test's random pick.
func freePort() (int, error) {
	if lo, ok := ephemeralLow(); ok && lo > 11000 {
		for range 64 {
			port := 10000 + rand.IntN(lo-10000)
			l, err := net.Listen("tcp", loopback(port))
			if err != nil {
				continue
			}
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil
}
