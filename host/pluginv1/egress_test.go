package pluginv1

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/testenv"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// A plugin's https:// calls go through the interception with its pass,
// and keep working past the pass's first expiry because the host renews
// it. The broker runs on a test clock: the pass TTL is long enough that
// no renewal happens on the real clock during the test, so the call
// after the clock has passed the first expiry succeeds only through the
// renewal the health probe asks for.
func TestProviderHTTPSThroughInterception(t *testing.T) {
	const passTTL = time.Hour
	clk := new(testenv.SkewClock)
	f := newHostFixtureBroker(t, passTTL, func(*broker.Config, broker.Store) broker.Options { return broker.Options{Now: clk.Now} })
	ctx := context.Background()
	p, err := Launch(ctx, f.install(t, badBin, "https"), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	call := func(when string) {
		t.Helper()
		out, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/ListTickets",
			// On the broker's clock: the handle's deadline is checked there.
			Input: &ticketsv1.ListTicketsRequest{}, Deadline: clk.Now().Add(30 * time.Second)})
		if err != nil || len(out.Diagnostics) != 1 || out.Diagnostics[0].Code != "https:200" {
			t.Fatalf("%s: %+v %v", when, out, err)
		}
		if got := <-f.seenAuth; got != "Bearer "+upstreamSecret {
			t.Fatalf("%s: the upstream saw %q", when, got)
		}
	}
	call("first call")
	clk.Advance(passTTL * 2 / 3)
	if err := p.proc.PassErr(ctx); err != nil { // the health probe's renewal
		t.Fatalf("renewing the pass: %v", err)
	}
	clk.Advance(passTTL * 2 / 3)
	call("past the pass's first expiry")
}

// A plugin whose pass is lost (here an operator revoked it) fails its next
// health probe and is restarted with a new pass; its https:// calls work
// again.
func TestLostPassRestartsPlugin(t *testing.T) {
	f := newHostFixtureWith(t, 2*time.Second)
	h := newTestHost(t, f, func(o *host.Options) { o.HealthInterval = 100 * time.Millisecond })
	inst := f.install(t, badBin, "https")
	if err := AddProvider(h, inst); err != nil {
		t.Fatal(err)
	}
	waitState(t, h, inst.Name, "running", func(s host.Status) bool { return s.State == host.StateRunning })
	f.b.mu.Lock()
	first := f.b.handles[0] // the pass, minted before the plugin started
	f.b.mu.Unlock()
	key, _ := broker.ParseHandle(first)
	if n, err := f.b.RevokeHandle(context.Background(), key.Fingerprint()); err != nil || n != 1 {
		t.Fatalf("revoking the pass: %d %v", n, err)
	}
	s := waitState(t, h, inst.Name, "restarted", func(s host.Status) bool { return s.Restarts >= 1 && s.State == host.StateRunning })
	if !strings.Contains(s.LastFailure, host.ErrProbeFailed.Error()) {
		t.Fatalf("status after the pass was lost: %+v", s)
	}
	out, err := h.Invoke(context.Background(), inst.Name, host.InvokeRequest{Method: listTickets,
		Input: &ticketsv1.ListTicketsRequest{}, Deadline: time.Now().Add(20 * time.Second)})
	if err != nil || len(out.Diagnostics) != 1 || out.Diagnostics[0].Code != "https:200" {
		t.Fatalf("after the restart: %+v %v", out, err)
	}
	if got := <-f.seenAuth; got != "Bearer "+upstreamSecret {
		t.Fatalf("the upstream saw %q", got)
	}
}
