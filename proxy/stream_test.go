package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// openEvents starts GET /events through c and returns the response once
// its head has arrived. The upstream has sent no body byte yet, so a
// proxy that held the head back until the body came would never answer
// (the client's timeout ends the test).
func openEvents(t testing.TB, c *http.Client, u string) *http.Response {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("stream head: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}

// Each event must reach the client before the upstream sends the next:
// the upstream waits for the test, which waits for the event, so a proxy
// that buffered or held back a tail would stall the stream until the
// client's timeout.
func TestStreamEventsPassAsSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		echo bool
		sse  bool
	}{{"sse guarded", true, true}, {"chunked guarded", true, false}, {"sse unguarded", false, true}, {"chunked unguarded", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.EchoGuard = &tc.echo })
			u := f.url("/events")
			if tc.sse {
				u += "?sse=1"
			}
			resp := openEvents(t, f.client(f.issue(t, "api.write", "inv-stream")), u)
			defer resp.Body.Close()
			if got := resp.Header.Get("Content-Type"); tc.sse != (got == "text/event-stream") {
				t.Fatalf("Content-Type %q", got)
			}
			br := bufio.NewReader(resp.Body)
			for i := range 5 {
				// Short events, shorter than any secret form: the old
				// guard held such a stream back a whole event.
				ev := "data: t" + string(rune('0'+i)) + "\n\n"
				f.up.events <- ev
				got := make([]byte, len(ev))
				if _, err := io.ReadFull(br, got); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if string(got) != ev {
					t.Fatalf("event %d: %q, want %q", i, got, ev)
				}
			}
			close(f.up.events)
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after the last event: %q, %v", rest, err)
			}
		})
	}
}

// A secret the upstream echoes split across two flushes is still
// redacted, and what precedes it is not held back with it: only a tail
// that could begin a secret waits for more.
func TestStreamSecretSplitAcrossFlushes(t *testing.T) {
	for _, sse := range []bool{true, false} {
		name := "chunked"
		if sse {
			name = "sse"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			u := f.url("/events")
			if sse {
				u += "?sse=1"
			}
			resp := openEvents(t, f.client(f.issue(t, "api.write", "inv-split")), u)
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			cut := len(testSecret) / 2
			lead := "data: you sent "
			f.up.events <- lead + testSecret[:cut]
			got := make([]byte, len(lead))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != lead {
				t.Fatalf("safe prefix: %q, %v", got, err)
			}
			f.up.events <- testSecret[cut:] + "\n\n"
			close(f.up.events)
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatal(err)
			}
			want := string(mask(len(testSecret))) + "\n\n"
			if string(rest) != want {
				t.Fatalf("rest of the stream %q, want %q", rest, want)
			}
		})
	}
}

// BenchmarkStreamEvent measures one event's trip from the upstream's
// flush to the client's read, through the proxy and directly; the
// difference is the latency the proxy adds per streamed event.
func BenchmarkStreamEvent(b *testing.B) {
	f := newBenchFixture(b)
	direct := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool(), ServerName: "api.example.com"},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, f.up.srv.Listener.Addr().String())
		},
	}}
	for _, bc := range []struct {
		name string
		c    *http.Client
		u    string
	}{
		{"direct", direct, strings.Replace(f.url("/events?sse=1"), "http://", "https://", 1)},
		{"proxy", f.client(f.issueB(b, "api.write")), f.url("/events?sse=1")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			resp := openEvents(b, bc.c, bc.u)
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			ev := "data: {\"token\":\"hello\"}\n\n"
			got := make([]byte, len(ev))
			b.ResetTimer()
			for b.Loop() {
				f.up.events <- ev
				if _, err := io.ReadFull(br, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A protocol switch other than WebSocket (websocket.go) is refused with
// its own code, and nothing reaches the upstream: after the switch the
// proxy could not hold the connection to its checks or the echo guard.
func TestUpgradeRefused(t *testing.T) {
	f := newFixture(t, nil)
	req, err := http.NewRequest(http.MethodGet, f.url("/socket"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "keep-alive, Upgrade")
	req.Header.Set("Upgrade", "h2c")
	resp, err := f.client(f.issue(t, "api.write", "inv-ws")).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || resp.Header.Get(HeaderError) != CodeUpgradeNotSupported {
		t.Fatalf("status %d, code %q", resp.StatusCode, resp.Header.Get(HeaderError))
	}
	if n := f.up.count(); n != 0 {
		t.Fatalf("the upstream saw %d requests", n)
	}
}
