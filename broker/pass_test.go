package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestIssuePass(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	now := f.clk.Now()
	for _, tc := range []struct {
		name      string
		req       IssueRequest
		wantErr   error
		wantDests []Destination
		wantLife  time.Duration
	}{
		{name: "manifest destinations, deduplicated to host and port",
			req: IssueRequest{Destinations: []Destination{{Host: "API.example.com", PathPrefix: "/v1/"}, {Host: "api.example.com", Methods: []string{"GET"}},
				{Host: "b.example.com", Port: 8443}}},
			wantDests: []Destination{{Host: "api.example.com", Port: 443}, {Host: "b.example.com", Port: 8443}}, wantLife: defaultPassTTL},
		{name: "destinations of the intents' bindings", req: IssueRequest{PassIntents: []string{"example.bound", "example.read"}},
			wantDests: []Destination{{Host: "api.example.com", Port: 443}}, wantLife: defaultPassTTL},
		{name: "a deadline sooner than the TTL", req: IssueRequest{Destinations: apiDest, Deadline: now.Add(20 * time.Minute)},
			wantDests: []Destination{{Host: "api.example.com", Port: 443}}, wantLife: 20 * time.Minute},
		{name: "intents without destinations", req: IssueRequest{PassIntents: []string{"example.read"}}, wantErr: ErrBadRequest},
		{name: "unknown intent", req: IssueRequest{PassIntents: []string{"nope"}}, wantErr: ErrIntentUnknown},
		{name: "with an intent", req: IssueRequest{Intent: "example.read", Destinations: apiDest}, wantErr: ErrBadRequest},
		{name: "dry run", req: IssueRequest{DryRun: true, Destinations: apiDest}, wantErr: ErrBadRequest},
		{name: "deadline passed", req: IssueRequest{Destinations: apiDest, Deadline: now.Add(-time.Second)}, wantErr: ErrDeadlinePassed},
		{name: "bad destination", req: IssueRequest{Destinations: []Destination{{Host: "exa mple.com"}}}, wantErr: ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.PluginID, req.InvocationID, req.Pass = "p", "pass-"+tc.name, true
			iss, err := f.b.Issue(ctx, req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := iss.ExpiresAt.Sub(now); got != tc.wantLife {
				t.Fatalf("lifetime %v, want %v", got, tc.wantLife)
			}
			g, err := f.b.Resolve(ctx, iss.Handle)
			if err != nil {
				t.Fatal(err)
			}
			if !g.Pass || g.Intent != "" || g.Class != "" || len(g.Destinations) != len(tc.wantDests) {
				t.Fatalf("grant %+v", g)
			}
			for i, d := range tc.wantDests {
				if g.Destinations[i].Host != d.Host || g.Destinations[i].Port != d.Port || g.Destinations[i].PathPrefix != "" {
					t.Fatalf("destinations %+v, want %+v", g.Destinations, tc.wantDests)
				}
			}
			if _, err := f.b.Secret(ctx, g, false); err == nil {
				t.Fatal("a pass fetched a secret")
			}
		})
	}
}

// The host revokes a plugin's handles when it exits; its pass goes too.
func TestPassRevokedWithThePlugin(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	iss, err := f.b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-x", Pass: true, Destinations: apiDest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.RevokePlugin(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Resolve(ctx, iss.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("after RevokePlugin: %v", err)
	}
}

// The host keeps a plugin's pass alive by renewing it: each renewal moves
// its expiry to pass_ttl from now, never past its deadline or
// max_pass_lifetime; only the plugin's own live pass can be renewed.
func TestRenewPass(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	renew := func(b *Broker, plugin, h string) (Issued, error) {
		return b.Issue(ctx, IssueRequest{PluginID: plugin, InvocationID: "pass-renew", Pass: true, Renew: h})
	}
	iss, err := f.b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-1", Pass: true, Destinations: apiDest})
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(40 * time.Minute)
	got, err := renew(f.b, "p", iss.Handle)
	if err != nil || got.Handle != iss.Handle || got.Fingerprint != iss.Fingerprint || !got.ExpiresAt.Equal(f.clk.Now().Add(defaultPassTTL)) {
		t.Fatalf("renewal: %+v %v", got, err)
	}
	f.clk.Advance(30 * time.Minute) // past the first expiry
	if g, err := f.b.Resolve(ctx, iss.Handle); err != nil || !g.Pass || !g.ExpiresAt.Equal(got.ExpiresAt) {
		t.Fatalf("renewed pass after its first expiry: %+v %v", g, err)
	}

	h := f.issue(t, "p", "inv-1", "example.read")
	bits := []byte(iss.Handle)
	bits[len(bits)-1] ^= 1
	for _, tc := range []struct {
		name, plugin, handle string
		want                 error
	}{
		{"another plugin's pass", "q", iss.Handle, ErrHandleUnknown},
		{"a handle, not a pass", "p", h.Handle, ErrHandleUnknown},
		{"a pass with a bit flipped", "p", string(bits), ErrHandleUnknown},
		{"no plugin", "", iss.Handle, ErrBadRequest},
	} {
		if _, err := renew(f.b, tc.plugin, tc.handle); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if g, _ := f.b.Resolve(ctx, h.Handle); g == nil || !g.ExpiresAt.Equal(h.ExpiresAt) {
		t.Fatalf("a refused renewal changed a handle: %+v", g)
	}

	f.clk.Advance(defaultPassTTL)
	if _, err := renew(f.b, "p", iss.Handle); !errors.Is(err, ErrHandleExpired) {
		t.Fatalf("an expired pass was renewed: %v", err)
	}

	live, err := f.b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-2", Pass: true, Destinations: apiDest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.RevokePlugin(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := renew(f.b, "p", live.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("a revoked pass was renewed: %v", err)
	}
}

func TestRenewPassLimits(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	cfg := f.cfg
	cfg.MaxPassLifetime = 90 * time.Minute
	capped := New(cfg, f.store, nil, Options{Now: f.clk.Now})
	start := f.clk.Now()
	for _, tc := range []struct {
		name  string
		b     *Broker
		req   IssueRequest
		until time.Time
	}{
		{"max_pass_lifetime", capped, IssueRequest{}, start.Add(90 * time.Minute)},
		{"the deadline", f.b, IssueRequest{Deadline: start.Add(100 * time.Minute)}, start.Add(100 * time.Minute)},
		{"the sooner of both", capped, IssueRequest{Deadline: start.Add(80 * time.Minute)}, start.Add(80 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.PluginID, req.InvocationID, req.Pass, req.Destinations = "p-"+tc.name, "pass-"+tc.name, true, apiDest
			iss, err := tc.b.Issue(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			at := f.clk.Now()
			f.clk.Advance(45 * time.Minute)
			defer func() { f.clk.Advance(at.Sub(f.clk.Now())) }()
			got, err := tc.b.Issue(ctx, IssueRequest{PluginID: req.PluginID, InvocationID: "pass-renew", Pass: true, Renew: iss.Handle})
			if err != nil || !got.ExpiresAt.Equal(tc.until) {
				t.Fatalf("renewed until %v (%v), want %v", got.ExpiresAt, err, tc.until)
			}
			f.clk.Advance(30 * time.Minute)
			again, err := tc.b.Issue(ctx, IssueRequest{PluginID: req.PluginID, InvocationID: "pass-renew", Pass: true, Renew: iss.Handle})
			if err != nil || !again.ExpiresAt.Equal(tc.until) {
				t.Fatalf("renewed at the limit: until %v (%v), want %v", again.ExpiresAt, err, tc.until)
			}
		})
	}
}
