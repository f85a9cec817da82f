package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every way an admitted request can end gives its concurrency slot back
// exactly once: refusals after admit (body too large, a handle left in
// the request), a body that overruns the limit while it streams, an
// unreachable upstream, a client that hangs up mid-request or
// mid-response, and plain successes, all at once. A leak would leave the
// plugin's count above zero (and the plugin locked out once it reaches
// the cap); a double release would take it below zero (and the cap would
// stop holding).
func TestConcurrencySlotMixedOutcomes(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Limits.PerPluginConcurrency = 64
		c.Limits.MaxRequestBody = 1024
	})
	f.res.set("down.example.org", "127.0.0.2") // nothing listens there
	h := f.issue(t, "api.write", "inv-slots")
	port := strconv.Itoa(f.up.port)
	auth := "Proxy-Authorization: Bearer " + h + "\r\n"
	head := func(method, host, path string, extra ...string) string {
		return method + " http://" + host + ":" + port + path + " HTTP/1.1\r\nHost: " + host + ":" + port + "\r\n" + auth +
			strings.Join(extra, "") + "\r\n"
	}
	big := strings.Repeat("b", 2048)
	chunk := strconv.FormatInt(int64(len(big)), 16) + "\r\n" + big + "\r\n0\r\n\r\n"
	outcomes := map[string]func(t *testing.T){
		"success": func(t *testing.T) {
			status, _ := rawRequest(t, dialRaw(t, f).c, head("GET", "api.example.com", "/x"))
			wantStatus(t, status, 200)
		},
		"pipelined successes": func(t *testing.T) {
			c := dialRaw(t, f).c
			io.WriteString(c, head("GET", "api.example.com", "/a")+head("GET", "api.example.com", "/b"))
			br := bufio.NewReader(c)
			for range 2 {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				wantStatus(t, resp.StatusCode, 200)
			}
		},
		"body over the limit, with its length": func(t *testing.T) {
			status, _ := rawRequest(t, dialRaw(t, f).c, head("POST", "api.example.com", "/x", "Content-Length: 2048\r\n")+big)
			wantStatus(t, status, http.StatusRequestEntityTooLarge)
		},
		"body over the limit, streamed": func(t *testing.T) {
			status, _ := rawRequest(t, dialRaw(t, f).c, head("POST", "api.example.com", "/x", "Transfer-Encoding: chunked\r\n")+chunk)
			if status < 400 {
				t.Fatalf("status %d for a body over the limit", status)
			}
		},
		"handle left in a header": func(t *testing.T) {
			status, _ := rawRequest(t, dialRaw(t, f).c, head("GET", "api.example.com", "/x", "X-Note: "+h+"\r\n"))
			wantStatus(t, status, http.StatusForbidden)
		},
		"upstream unreachable": func(t *testing.T) {
			status, _ := rawRequest(t, dialRaw(t, f).c, head("GET", "down.example.org", "/x"))
			wantStatus(t, status, http.StatusBadGateway)
		},
		"client gone mid-request": func(t *testing.T) {
			c := dialRaw(t, f).c
			io.WriteString(c, head("POST", "api.example.com", "/x", "Content-Length: 100\r\n")+"half")
			c.Close()
		},
		"client gone mid-response": func(t *testing.T) {
			c := dialRaw(t, f).c
			io.WriteString(c, head("GET", "api.example.com", "/stream"))
			c.Read(make([]byte, 1))
			c.Close()
		},
	}
	var wg sync.WaitGroup
	for round := range 4 {
		for name, run := range outcomes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(strconv.Itoa(round)+"/"+name, run)
			}()
		}
	}
	wg.Wait()
	p := f.proxy.limits.Load().pluginEntry("plugin-1")
	// The hung-up requests end on the proxy's side after the client's.
	for deadline := time.Now().Add(10 * time.Second); p.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.inflight.Load(); n != 0 {
		t.Fatalf("%d slots held after every request ended, want 0", n)
	}
}

func wantStatus(t *testing.T, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("status %d, want %d", got, want)
	}
}
