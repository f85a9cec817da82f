package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// BenchmarkRabbitMQ: requests through the proxy to RabbitMQ's management
// API (GET /api/whoami behind a TLS front), credentialed three ways:
//   - static: a static secret (RabbitMQ's administrator, from the file
//     source), the baseline;
//   - lease-steady: a later request of an invocation whose RabbitMQ user
//     exists (the lease is held);
//   - lease-first-use: the first request of a new invocation: Vault
//     creates a RabbitMQ user, the store records the lease; the
//     invocation's end (Vault deletes the user) is not timed;
//   - lease-end: the end of an invocation whose user exists
//     (RevokeInvocation: handles, then the lease, synchronously).
func BenchmarkRabbitMQ(b *testing.B) {
	e := newRabbitEnv(b)
	p := e.newLeaseProxy(b, nil, e.vc, broker.LeasesConfig{})
	pu := func(h string) *http.Client {
		u := &url.URL{Scheme: "http", Host: p.addr, User: url.User(h)}
		return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}, Timeout: 30 * time.Second}
	}
	target := "http://" + mqHost + ":" + strconv.Itoa(e.port) + "/api/whoami"
	get := func(b *testing.B, c *http.Client) {
		resp, err := c.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	deadline := time.Now().Add(time.Hour)
	ctx := context.Background()
	// b.Run runs each body more than once: a new invocation every time.
	runs := 0
	next := func(what string) string { runs++; return "inv-" + what + "-" + strconv.Itoa(runs) }
	b.Run("static", func(b *testing.B) {
		c := pu(e.issueFor(b, p.b, next("static"), "mq.static", deadline))
		get(b, c)
		for b.Loop() {
			get(b, c)
		}
	})
	b.Run("lease-steady", func(b *testing.B) {
		inv := next("steady")
		c := pu(e.issue(b, p.b, inv, deadline))
		get(b, c)
		for b.Loop() {
			get(b, c)
		}
		b.StopTimer()
		if _, err := p.b.RevokeInvocation(ctx, inv); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("lease-first-use", func(b *testing.B) {
		for b.Loop() {
			inv := next("first")
			b.StopTimer()
			c := pu(e.issue(b, p.b, inv, deadline))
			b.StartTimer()
			get(b, c)
			b.StopTimer()
			c.CloseIdleConnections()
			if _, err := p.b.RevokeInvocation(ctx, inv); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("lease-end", func(b *testing.B) {
		for b.Loop() {
			inv := next("end")
			b.StopTimer()
			c := pu(e.issue(b, p.b, inv, deadline))
			get(b, c)
			c.CloseIdleConnections()
			b.StartTimer()
			if _, err := p.b.RevokeInvocation(ctx, inv); err != nil {
				b.Fatal(err)
			}
		}
	})
}
