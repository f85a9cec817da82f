package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestRateLimits(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		// Rates so low that nothing refills during the test.
		c.Limits.PerHandleRPS, c.Limits.PerHandleBurst = 0.001, 3
		c.Limits.PerPluginRPS, c.Limits.PerPluginBurst = 0.001, 5
	})
	a := f.issue(t, "api.write", "inv-rl-a")
	codes := []int{}
	for range 4 {
		code, _, _ := do(t, f.client(a), "GET", f.url("/x"), nil, "")
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Fatalf("per-handle burst of 3: %v", codes)
	}
	// Another handle of the same plugin has its own handle budget but
	// shares the plugin's: 5 in all, 3 used (the refused 4th took none).
	b := f.issue(t, "api.write", "inv-rl-b")
	for i := range 2 {
		if code, _, _ := do(t, f.client(b), "GET", f.url("/x"), nil, ""); code != 200 {
			t.Fatalf("second handle, request %d: %d", i+1, code)
		}
	}
	code, errCode, _ := do(t, f.client(b), "GET", f.url("/x"), nil, "")
	if code != http.StatusTooManyRequests || errCode != CodeRateLimited {
		t.Fatalf("plugin budget exhausted: %d %s", code, errCode)
	}
}

func TestConcurrencyCap(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Limits.PerPluginConcurrency = 2 })
	h := f.issue(t, "api.write", "inv-cc")
	c := f.client(h)
	results := make(chan int, 2)
	for range 2 {
		go func() {
			code, _, _ := do(t, c, "GET", f.url("/slow"), nil, "")
			results <- code
		}()
	}
	// Wait until both are in flight at the upstream.
	for deadline := time.Now().Add(5 * time.Second); f.up.count() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow requests never reached the upstream")
		}
	}
	code, errCode, _ := do(t, c, "GET", f.url("/x"), nil, "")
	if code != http.StatusTooManyRequests || errCode != CodeTooManyConcurrent {
		t.Fatalf("third concurrent request: %d %s", code, errCode)
	}
	close(f.up.hold)
	for range 2 {
		if code := <-results; code != 200 {
			t.Fatalf("slow request: %d", code)
		}
	}
	// Slots are released when the responses end.
	if code, _, _ := do(t, c, "GET", f.url("/x"), nil, ""); code != 200 {
		t.Fatalf("after the slow requests ended: %d", code)
	}

	lim := newLimiter(LimitsConfig{PerHandleRPS: 100, PerHandleBurst: 100, PerPluginRPS: 100, PerPluginBurst: 100, PerPluginConcurrency: 1})
	s, _ := lim.admit(context.Background(), grantFor("p"), time.Now())
	s.release()
	s.release() // a second release must not free a slot it does not hold
	if _, d := lim.admit(context.Background(), grantFor("p"), time.Now()); d != nil {
		t.Fatalf("after release: %v", d)
	}
	if _, d := lim.admit(context.Background(), grantFor("p"), time.Now()); d == nil {
		t.Fatal("double release freed a second slot")
	}
}

func TestOversizedHeadersAndBody(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Limits.MaxRequestBody = 1024 })
	h := f.issue(t, "api.write", "inv-size")
	big := http.Header{"X-Big": {strings.Repeat("a", 80<<10)}}
	code, _, _ := do(t, f.client(h), "GET", f.url("/x"), big, "")
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("80 KiB header: %d, want 431", code)
	}
	code, errCode, _ := do(t, f.client(h), "POST", f.url("/x"), nil, strings.Repeat("b", 2048))
	if code != http.StatusRequestEntityTooLarge || errCode != CodeBodyTooLarge {
		t.Fatalf("2 KiB body over a 1 KiB limit: %d %s", code, errCode)
	}
}

// A client that sends headers one byte at a time is cut off at
// ReadHeaderTimeout, and other clients are served meanwhile.
func TestSlowlorisCutOff(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Limits.ReadHeaderTimeout = 300 * time.Millisecond })
	h := f.issue(t, "api.write", "inv-slow")
	var wg sync.WaitGroup
	cutOff := make(chan bool, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			cutOff <- false
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("GET " + f.url("/x") + " HTTP/1.1\r\nX-Slow: "))
		start := time.Now()
		for time.Since(start) < 3*time.Second {
			if _, err := c.Write([]byte("a")); err != nil {
				cutOff <- true // the server closed the connection
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil || !isTimeout(err) {
				// EOF (closed) or a 408 status line: cut off either way.
				cutOff <- err != nil || strings.Contains(line, "408")
				return
			}
		}
		cutOff <- false
	}()
	// Meanwhile a normal client is served.
	if code, _, _ := do(t, f.client(h), "GET", f.url("/x"), nil, ""); code != 200 {
		t.Fatalf("normal client during slowloris: %d", code)
	}
	wg.Wait()
	if !<-cutOff {
		t.Fatal("the slow client was not cut off within 3 s (ReadHeaderTimeout 300 ms)")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Rates with scope global hold across replicas: two proxies' limiters on
// one real Redis admit a handle's burst once between them, not once each;
// Redis down refuses with limits_unavailable (closed).
func TestGlobalLimitsAcrossReplicas(t *testing.T) {
	r := testenv.Redis(t)
	store, err := broker.NewRedisStore(broker.RedisConfig{Address: r.Addr, KeyPrefix: "gl-test:"}, time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := LimitsConfig{PerHandleRPS: 1, PerHandleBurst: 5, PerPluginRPS: 1000, PerPluginBurst: 1000, Scope: LimitsGlobal}
	replicas := []*limiter{newLimiter(cfg), newLimiter(cfg)}
	for _, l := range replicas {
		l.global = store
	}
	g := grantFor("p")
	admitted := 0
	for i := 0; i < 20; i++ {
		s, d := replicas[i%2].admit(context.Background(), g, time.Now())
		if d == nil {
			admitted++
			s.release()
		} else if d.code != CodeRateLimited {
			t.Fatalf("request %d: %s", i, d.code)
		}
	}
	if admitted < 5 || admitted > 6 {
		t.Fatalf("%d of 20 admitted across two replicas, want the burst of 5 (6 with a refill)", admitted)
	}
	r.Stop()
	if _, d := replicas[0].admit(context.Background(), grantFor("q"), time.Now()); d == nil || d.code != CodeLimitsUnavailable {
		t.Fatalf("with Redis down: %+v", d)
	}
}
