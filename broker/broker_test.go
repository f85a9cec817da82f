package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestIssue(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		req      func(now time.Time) IssueRequest
		wantErr  error
		wantLife time.Duration
	}{
		{name: "read intent", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: apiDest, Deadline: now.Add(time.Minute)}
		}, wantLife: time.Minute},
		{name: "expires at the deadline, capped by max lifetime", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: apiDest, Deadline: now.Add(48 * time.Hour)}
		}, wantLife: defaultMaxHandleLifetime},
		{name: "dry run, read intent", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: apiDest, Deadline: now.Add(time.Minute), DryRun: true}
		}, wantLife: time.Minute},
		{name: "dry run, write intent", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.write", Destinations: apiDest, Deadline: now.Add(time.Minute), DryRun: true}
		}, wantErr: ErrDryRunWrite},
		{name: "unknown intent", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "evil\r\nintent", Destinations: apiDest, Deadline: now.Add(time.Minute)}
		}, wantErr: ErrIntentUnknown},
		{name: "unbound intent", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.unbound", Destinations: apiDest, Deadline: now.Add(time.Minute)}
		}, wantErr: ErrIntentUnbound},
		{name: "deadline passed", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: apiDest, Deadline: now.Add(-time.Second)}
		}, wantErr: ErrDeadlinePassed},
		{name: "no destinations anywhere", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Deadline: now.Add(time.Minute)}
		}, wantErr: ErrBadRequest},
		{name: "no destinations: the intent binding's", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.bound", Deadline: now.Add(time.Minute)}
		}, wantLife: time.Minute},
		{name: "bad destination", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: []Destination{{Host: "10.0.0.1"}}, Deadline: now.Add(time.Minute)}
		}, wantErr: ErrBadRequest},
		{name: "no invocation", req: func(now time.Time) IssueRequest {
			return IssueRequest{PluginID: "p", Intent: "example.read", Destinations: apiDest, Deadline: now.Add(time.Minute)}
		}, wantErr: ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMemFixture(t)
			now := f.clk.Now()
			req := tt.req(now)
			iss, err := f.b.Issue(ctx, req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "evil") {
					t.Fatalf("error echoes the plugin's intent name: %v", err)
				}
				if f.store.Len() != 0 {
					t.Fatal("a refused issue left state behind")
				}
				return
			}
			if got := iss.ExpiresAt.Sub(now); got != tt.wantLife {
				t.Fatalf("lifetime %s, want %s", got, tt.wantLife)
			}
			if iss.EgressProxy != "127.0.0.1:8899" || !handleRE.MatchString(iss.Handle) {
				t.Fatalf("issued %+v", iss)
			}
			g, err := f.b.Resolve(ctx, iss.Handle)
			if err != nil {
				t.Fatal(err)
			}
			if g.PluginID != "p" || g.InvocationID != "i" || g.Intent != req.Intent || g.DryRun != req.DryRun ||
				g.Destinations[0].Port != 443 || g.Fingerprint != iss.Fingerprint {
				t.Fatalf("grant %+v", g)
			}
		})
	}
}

func TestResolveOutcomes(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	iss := f.issue(t, "p1", "inv-1", "example.read")
	if _, err := f.b.Resolve(ctx, iss.Handle); err != nil {
		t.Fatalf("live: %v", err)
	}
	other, _, _ := newHandle()
	if _, err := f.b.Resolve(ctx, other); !errors.Is(err, ErrHandleUnknown) {
		t.Fatalf("never issued: %v", err)
	}
	if _, err := f.b.Resolve(ctx, "Bearer garbage"); !errors.Is(err, ErrHandleUnknown) {
		t.Fatalf("garbage: %v", err)
	}
	f.clk.Advance(time.Minute)
	g, err := f.b.Resolve(ctx, iss.Handle)
	if !errors.Is(err, ErrHandleExpired) || g == nil || g.InvocationID != "inv-1" {
		t.Fatalf("at expiry: %v (grant for audit: %v)", err, g)
	}
	f.clk.Advance(defaultExpiredRetention + time.Second)
	f.store.sweep()
	if _, err := f.b.Resolve(ctx, iss.Handle); !errors.Is(err, ErrHandleUnknown) {
		t.Fatalf("after retention and sweep: %v", err)
	}
	if f.store.Len() != 0 {
		t.Fatalf("sweep left %d grants", f.store.Len())
	}
}

func TestRevocation(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	a1 := f.issue(t, "p1", "inv-1", "example.read")
	a2 := f.issue(t, "p1", "inv-1", "example.write")
	b := f.issue(t, "p1", "inv-2", "example.read")
	c := f.issue(t, "p2", "inv-3", "example.read")

	n, err := f.b.RevokeInvocation(ctx, "inv-1")
	if err != nil || n != 2 {
		t.Fatalf("RevokeInvocation = %d, %v", n, err)
	}
	for _, h := range []string{a1.Handle, a2.Handle} {
		if _, err := f.b.Resolve(ctx, h); !errors.Is(err, ErrHandleRevoked) {
			t.Fatalf("revoked invocation's handle: %v", err)
		}
	}
	if _, err := f.b.Resolve(ctx, b.Handle); err != nil {
		t.Fatalf("other invocation's handle: %v", err)
	}
	if _, err := f.b.Issue(ctx, IssueRequest{PluginID: "p1", InvocationID: "inv-1", Intent: "example.read",
		Destinations: apiDest, Deadline: f.clk.Now().Add(time.Minute)}); !errors.Is(err, ErrInvocationRevoked) {
		t.Fatalf("issue for a revoked invocation: %v", err)
	}

	n, err = f.b.RevokePlugin(ctx, "p1")
	if err != nil || n != 1 {
		t.Fatalf("RevokePlugin = %d, %v", n, err)
	}
	if _, err := f.b.Resolve(ctx, b.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("revoked plugin's handle: %v", err)
	}
	if _, err := f.b.Resolve(ctx, c.Handle); err != nil {
		t.Fatalf("other plugin's handle: %v", err)
	}
	// A restarted plugin gets new handles.
	f.clk.Advance(time.Millisecond)
	fresh := f.issue(t, "p1", "inv-4", "example.read")
	if _, err := f.b.Resolve(ctx, fresh.Handle); err != nil {
		t.Fatalf("restarted plugin: %v", err)
	}
}

func TestIssueLimitAndStoreCap(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	f.cfg.MaxHandlesPerInvocation = 3
	f.b.cfg.MaxHandlesPerInvocation = 3
	for range 3 {
		f.issue(t, "p", "inv", "example.read")
	}
	if _, err := f.b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read",
		Destinations: apiDest, Deadline: f.clk.Now().Add(time.Minute)}); !errors.Is(err, ErrIssueLimit) {
		t.Fatalf("4th handle: %v", err)
	}

	small := NewMemoryStore(2, 0, time.Hour, f.clk.Now)
	b := New(f.cfg, small, nil, Options{Now: f.clk.Now})
	req := IssueRequest{PluginID: "p", Intent: "example.read", Destinations: apiDest, Deadline: f.clk.Now().Add(time.Second)}
	for i := range 2 {
		req.InvocationID = string(rune('a' + i))
		if _, err := b.Issue(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	req.InvocationID = "c"
	if _, err := b.Issue(ctx, req); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("past max: %v", err)
	}
	f.clk.Advance(2 * time.Second) // both expire; a full store sweeps before refusing
	req.Deadline = f.clk.Now().Add(time.Second)
	if _, err := b.Issue(ctx, req); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// A dump of the store yields no usable handle.
func TestMemoryStoreHoldsNoHandle(t *testing.T) {
	f := newMemFixture(t)
	var handles []string
	for i := range 5 {
		handles = append(handles, f.issue(t, "p", "inv-"+string(rune('a'+i)), "example.read").Handle)
	}
	f.store.mu.RLock()
	defer f.store.mu.RUnlock()
	var dump strings.Builder
	for k, e := range f.store.grants {
		dump.WriteString(k.String())
		dump.WriteString(e.g.Fingerprint)
		dump.WriteString(e.g.PluginID + e.g.InvocationID + e.g.Intent)
	}
	for _, h := range handles {
		if strings.Contains(dump.String(), h) || strings.Contains(dump.String(), h[4:20]) {
			t.Fatal("store dump contains a handle")
		}
	}
}

func TestSecretFor(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	s, err := f.b.SecretFor(ctx, "example.write", false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Value != "s3cr3t-value" || s.Username != "bot" || s.Version != 1 {
		t.Fatalf("secret = %+v", s)
	}
	f.b.cfg.Intents["example.read"] = Intent{Class: ClassRead, Secret: SecretRef{Source: SourceFile, Path: "example/api", Field: "nope"}}
	_, err = f.b.SecretFor(ctx, "example.read", false)
	if !errors.Is(err, ErrSecretFieldMissing) || !strings.Contains(err.Error(), `intent "example.read"`) {
		t.Fatalf("missing field: %v", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "example/api") {
		t.Fatalf("error reveals the secret or its path: %v", err)
	}
	f.b.cfg.Intents["example.read"] = Intent{Class: ClassRead, Secret: SecretRef{Source: SourceFile, Path: "missing/path", Field: "token"}}
	if _, err := f.b.SecretFor(ctx, "example.read", false); !errors.Is(err, ErrSecretNotFound) {
		t.Fatalf("missing path: %v", err)
	}
}
