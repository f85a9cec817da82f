package tokens

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// downSource fails every call while down is set (Vault unreachable).
type downSource struct {
	MemorySource
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (d *downSource) Load(ctx context.Context) (KeySet, error) {
	if d.down.Load() {
		return KeySet{}, errDown
	}
	return d.MemorySource.Load(ctx)
}

func (d *downSource) Save(ctx context.Context, set KeySet) error {
	if d.down.Load() {
		return errDown
	}
	return d.MemorySource.Save(ctx, set)
}

// A ring started while its source is down holds no key and verifies
// nothing; once the source answers, RotateIfDue creates and saves the
// first key.
func TestPendingRingLoadsWhenTheSourceReturns(t *testing.T) {
	ctx := context.Background()
	src := &downSource{}
	src.down.Store(true)
	if _, err := NewRing(ctx, src, RingOptions{}); !errors.Is(err, errDown) {
		t.Fatalf("NewRing with the source down: %v", err)
	}
	r, err := NewPendingRing(src, RingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Active() != nil || len(r.Keys()) != 0 || len(r.JWKS().Keys) != 0 {
		t.Fatal("a pending ring holds a key")
	}
	if _, err := r.RotateIfDue(ctx); !errors.Is(err, errDown) {
		t.Fatalf("RotateIfDue with the source down: %v", err)
	}
	src.down.Store(false)
	if ok, err := r.RotateIfDue(ctx); err != nil || !ok {
		t.Fatalf("RotateIfDue with the source back: %v %v", ok, err)
	}
	set, err := src.MemorySource.Load(ctx)
	if err != nil || len(set.Keys) != 1 || r.Active() == nil || set.Keys[0].ID != r.Active().ID {
		t.Fatalf("the first key is not saved and active: %v %v", set.Keys, err)
	}
}
