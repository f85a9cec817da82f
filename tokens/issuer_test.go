package tokens

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMintLifetime(t *testing.T) {
	tests := []struct {
		name     string
		deadline time.Duration // from now
		wantLife time.Duration
		wantErr  error
	}{
		{name: "long invoke: TTL caps", deadline: time.Hour, wantLife: DefaultTTL},
		{name: "short invoke: deadline plus grace caps", deadline: 10 * time.Second, wantLife: 10*time.Second + DefaultGrace},
		{name: "deadline passed", deadline: -time.Second, wantErr: ErrDeadlinePassed},
		{name: "deadline now", deadline: 0, wantErr: ErrDeadlinePassed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, EdDSA)
			now := f.clk.Now()
			_, c, err := f.iss.MintSampling(SamplingGrant{Binding: testBinding, Deadline: now.Add(tt.deadline),
				MaxTokensPerCall: 100, MaxCallsPerInvoke: 2})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := c.ExpiresAt.Sub(c.IssuedAt.Time); got != tt.wantLife {
				t.Fatalf("lifetime = %s, want %s", got, tt.wantLife)
			}
		})
	}
}

func TestMintRejectsBadGrants(t *testing.T) {
	f := newFixture(t, EdDSA)
	dl := f.clk.Now().Add(time.Minute)
	noUser := testBinding
	noUser.UserID = ""
	if _, _, err := f.iss.MintStorage(StorageGrant{Binding: noUser, Deadline: dl}); !errors.Is(err, ErrInvalidBinding) {
		t.Errorf("missing user_id: %v", err)
	}
	if _, _, err := f.iss.MintSampling(SamplingGrant{Binding: testBinding, Deadline: dl}); err == nil {
		t.Error("sampling without caps minted")
	}
	if _, _, err := f.iss.MintStorage(StorageGrant{Binding: testBinding, Deadline: dl, AppID: "a"}); err == nil {
		t.Error("app_id without app_slug minted")
	}
	if _, _, err := f.iss.MintStorage(StorageGrant{Binding: testBinding}); err == nil {
		t.Error("no deadline minted")
	}
}

func TestStorageScopes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, EdDSA)
	dl := f.clk.Now().Add(time.Minute)

	plain, _, err := f.iss.MintStorage(StorageGrant{Binding: testBinding, Deadline: dl})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.ver.VerifyStorage(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasScope(ScopeUser) || !c.HasScope(ScopeTool) || c.HasScope(ScopeApp) || c.AppID != "" {
		t.Fatalf("plain storage token scopes = %v app=%q", c.Scopes, c.AppID)
	}

	app, _, err := f.iss.MintStorage(StorageGrant{Binding: testBinding, Deadline: dl, AppID: "app-7", AppSlug: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	c, err = f.ver.VerifyStorage(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasScope(ScopeApp) || c.AppID != "app-7" || c.AppSlug != "notes" {
		t.Fatalf("app storage token: scopes=%v app=%q/%q", c.Scopes, c.AppID, c.AppSlug)
	}

	// A forged scope "app" without the attested claims is refused.
	claims := f.validClaims()
	claims["aud"] = AudienceStorage
	claims["scopes"] = []string{"user", "tool", "app"}
	k := f.rng.Active()
	if _, err := f.ver.VerifyStorage(ctx, forge(t, k, hdr(k), claims)); !errors.Is(err, ErrBadClaim) {
		t.Fatalf("scope app without app claims: %v", err)
	}
}

func TestSamplingCapsCarried(t *testing.T) {
	f := newFixture(t, ES256)
	tok, _, err := f.iss.MintSampling(SamplingGrant{Binding: testBinding, Deadline: f.clk.Now().Add(time.Minute),
		MaxTokensPerCall: 4096, MaxCallsPerInvoke: 3})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.ver.VerifySampling(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTokensPerCall != 4096 || c.MaxCallsPerInvoke != 3 || c.Issuer != DefaultIssuer || c.ID == "" {
		t.Fatalf("claims = %+v", c)
	}
}
