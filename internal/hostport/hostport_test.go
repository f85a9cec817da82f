package hostport

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		listen     bool
		want       error
	}{
		{"loopback", "127.0.0.1:9464", true, nil},
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
