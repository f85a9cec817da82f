package broker

import (
	"context"
	"testing"
)

// nilLeases is a lease manager type whose nil pointer a composition root
// passes when no intent is leased.
type nilLeases struct{ LeasedSecrets }

// A nil manager in Options is no manager: ending an invocation does not
// call it (a nil *lease.Manager in the interface would be called).
func TestNilLeaseManagerIsNone(t *testing.T) {
	f := newMemFixture(t)
	var none *nilLeases
	b := New(f.cfg, f.store, nil, Options{Now: f.clk.Now, Leases: none})
	if b.Leases() != nil {
		t.Fatal("a nil manager was kept")
	}
	if _, err := b.EndInvocation(context.Background(), "inv"); err != nil {
		t.Fatal(err)
	}
}
