package hostport

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		listen     bool
		want       error
	}{
		{"loopback", "127.0.0.1:8080", true, nil},
		{"any interface", ":8080", true, nil},
		{"free port", "127.0.0.1:0", true, nil},
		{"ipv6", "[::1]:443", false, nil},
		{"name", "redis.internal:6379", false, nil},
		{"no port", "127.0.0.1", true, ErrForm},
		{"port too big", "127.0.0.1:99999", true, ErrPort},
		{"port not a number", "127.0.0.1:http", true, ErrPort},
		{"negative port", "127.0.0.1:-1", true, ErrPort},
		{"dial port 0", "127.0.0.1:0", false, ErrDialPort},
		{"dial port too big", "127.0.0.1:70000", false, ErrDialPort},
		{"dial without host", ":6379", false, ErrHost},
		{"host with space", "my host:80", true, ErrHost},
		{"host with slash", "a/b:80", true, ErrHost},
		{"bad ip", "300.1.1.1:80", true, ErrHost},
		{"host with @", "user@host:80", true, ErrHost},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.addr, c.listen); !errors.Is(got, c.want) {
				t.Fatalf("check(%q, listen=%v) = %v, want %v", c.addr, c.listen, got, c.want)
			}
		})
	}
}

// Whatever the input, an accepted address splits, its port is a number a
// listener can take, and a rejection is one of the fixed errors (so it
// never quotes the input).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8080", ":0", "[::1]:443", "host:99999", "a b:1", "300.1.1.1:80", "x:-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		for _, listen := range []bool{true, false} {
			err := check(addr, listen)
			if err == nil {
				_, port, serr := net.SplitHostPort(addr)
				n, perr := strconv.Atoi(port)
				if serr != nil || perr != nil || n < 0 || n > 65535 || (!listen && n == 0) {
					t.Fatalf("accepted %q (listen %v)", addr, listen)
				}
				continue
			}
			// One of the fixed errors: nothing of the input in it.
			if err != ErrForm && err != ErrPort && err != ErrHost && err != ErrDialPort {
				t.Fatalf("%q: not one of the fixed errors: %v", addr, err)
			}
		}
	})
}
