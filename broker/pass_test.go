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
			wantDests: []Destination{{Host: "api.example.com", Port: 443}, {Host: "b.example.com", Port: 8443}}, wantLife: DefaultMaxPassLifetime},
		{name: "destinations of the intents' bindings", req: IssueRequest{PassIntents: []string{"example.bound", "example.read"}},
			wantDests: []Destination{{Host: "api.example.com", Port: 443}}, wantLife: DefaultMaxPassLifetime},
		{name: "a deadline sooner than the cap", req: IssueRequest{Destinations: apiDest, Deadline: now.Add(time.Hour)},
			wantDests: []Destination{{Host: "api.example.com", Port: 443}}, wantLife: time.Hour},
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
