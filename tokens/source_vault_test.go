package tokens

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Two issuers on one real Vault key source: each verifies the other's
// tokens, a rotation on one is picked up by the other, tokens signed by
// the retired key keep verifying within retention.
func TestVaultSourceSharedAcrossIssuers(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	clk := newClock()
	newSide := func() (*Ring, *Issuer, *Verifier) {
		src := &VaultSource{Client: v.Client(t), Mount: "secret", Path: "airlock/tokens/" + t.Name()}
		r, err := NewRing(ctx, src, RingOptions{Retention: DefaultTTL + DefaultLeeway, Now: clk.Now, MinRefresh: time.Nanosecond})
		if err != nil {
			t.Fatalf("NewRing on Vault: %v", err)
		}
		ver, err := NewVerifier(r, VerifierOptions{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return r, NewIssuer(r, IssuerOptions{Now: clk.Now}), ver
	}
	ringA, issA, verA := newSide()
	ringB, issB, verB := newSide()
	if ringA.Active().ID != ringB.Active().ID {
		t.Fatalf("replicas made different first keys: %s vs %s", ringA.Active().ID, ringB.Active().ID)
	}
	mint := func(iss *Issuer) string {
		tok, _, err := iss.MintSampling(SamplingGrant{Binding: testBinding, Deadline: clk.Now().Add(time.Minute),
			MaxTokensPerCall: 10, MaxCallsPerInvoke: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	before := mint(issA)
	if _, err := verB.VerifySampling(ctx, before); err != nil {
		t.Fatalf("B verifies A's token: %v", err)
	}

	newKey, err := ringA.Rotate(ctx)
	if err != nil {
		t.Fatalf("rotate on Vault: %v", err)
	}
	after := mint(issA)
	// B has not refreshed: the unknown kid makes it reload from Vault.
	if _, err := verB.VerifySampling(ctx, after); err != nil {
		t.Fatalf("B verifies A's token after A rotated: %v", err)
	}
	if ringB.Active().ID != newKey.ID {
		t.Fatalf("B's active key = %s, want %s", ringB.Active().ID, newKey.ID)
	}
	if _, err := verA.VerifySampling(ctx, mint(issB)); err != nil {
		t.Fatalf("A verifies B's token signed with the new key: %v", err)
	}
	if _, err := verB.VerifySampling(ctx, before); err != nil {
		t.Fatalf("old token within retention: %v", err)
	}
	clk.Advance(DefaultTTL + DefaultLeeway + time.Second)
	if _, err := verB.VerifySampling(ctx, before); !errors.Is(err, ErrExpired) && !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old token after retention: %v", err)
	}
}

func TestVaultSourceConflict(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	src := &VaultSource{Client: v.Client(t), Mount: "secret", Path: "airlock/tokens/" + t.Name()}
	if _, err := NewRing(ctx, src, RingOptions{Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	set, err := src.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Save(ctx, set); err != nil {
		t.Fatalf("save at current version: %v", err)
	}
	if err := src.Save(ctx, set); !errors.Is(err, ErrConflict) {
		t.Fatalf("save at stale version: %v, want ErrConflict", err)
	}
	if err := src.Save(ctx, KeySet{Keys: set.Keys}); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over existing: %v, want ErrConflict", err)
	}
}

// Replicas started together on an empty Vault key source end with one
// key: a check-and-set loser adopts the winner's key.
func TestVaultSourceConcurrentStartOneKey(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	path := "airlock/tokens/" + t.Name()
	rings := make([]*Ring, 6)
	errs := make(chan error, len(rings))
	for i := range rings {
		go func() {
			r, err := NewRing(ctx, &VaultSource{Client: v.Client(t), Mount: "secret", Path: path}, RingOptions{Retention: time.Hour})
			rings[i] = r
			errs <- err
		}()
	}
	for range rings {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rings {
		if r.Active().ID != rings[0].Active().ID || len(r.Keys()) != 1 {
			t.Fatalf("replicas sign with different keys: %s vs %s (%d keys)", r.Active().ID, rings[0].Active().ID, len(r.Keys()))
		}
	}
}

// The key secret deleted in Vault (or a Vault that lost its data): the
// ring keeps its keys, tokens keep verifying, and the keys are written
// back for the other replicas.
func TestVaultSourceDeletedKeysKept(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	path := "airlock/tokens/" + t.Name()
	src := &VaultSource{Client: v.Client(t), Mount: "secret", Path: path}
	r, err := NewRing(ctx, src, RingOptions{Retention: time.Hour, MinRefresh: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	kid := r.Active().ID
	if err := v.Client(t).KVv2("secret").DeleteMetadata(ctx, path); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Active() == nil || r.Active().ID != kid || len(r.JWKS().Keys) != 1 {
		t.Fatalf("the ring dropped its key after an empty read: %+v", r.Active())
	}
	set, err := src.Load(ctx)
	if err != nil || len(set.Keys) != 1 || set.Keys[0].ID != kid {
		t.Fatalf("the held key was not written back: %+v %v", set, err)
	}
}
