package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

// A lease obtained and revoked under a caller's span makes a span for
// each, children of the caller's, naming the intent, the invocation and
// the lease's fingerprint, never its id; under no span, none.
func TestLeaseSpans(t *testing.T) {
	rcv, tr := tracingtest.Start(t, tracing.Options{Service: "lease-test"})
	v := testenv.Vault(t)
	mount := newMount(t, v)
	f := newLeaseFixture(t, v.Client(t), mount, nil, broker.LeasesConfig{})
	deadline := time.Now().Add(time.Hour)
	if _, err := f.b.Secret(context.Background(), f.issue(t, "inv-untraced", "cert", deadline), false); err != nil {
		t.Fatal(err)
	}
	ctx, root := tr.Tracer("test").Start(context.Background(), "caller")
	sec, err := f.b.Secret(ctx, f.issue(t, "inv-traced", "cert", deadline), false)
	if err != nil {
		t.Fatal(err)
	}
	leaseIDs := v.Leases(t, mount+"/issue/leaf/") // both, before one is revoked
	if len(leaseIDs) != 2 {
		t.Fatalf("Vault lists %d leases, want 2", len(leaseIDs))
	}
	if _, err := f.b.RevokeInvocation(ctx, "inv-traced"); err != nil {
		t.Fatal(err)
	}
	root.End()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]tracingtest.Span{}
	for _, s := range rcv.Spans() {
		if s.Name == SpanObtain || s.Name == SpanRevoke {
			if _, dup := got[s.Name]; dup {
				t.Fatalf("two %s spans: the untraced use made one", s.Name)
			}
			got[s.Name] = s
		}
		for _, str := range s.Strings() {
			for _, id := range leaseIDs {
				if strings.Contains(str, id) {
					t.Errorf("span %s carries a lease id", s.Name)
				}
			}
		}
	}
	for _, name := range []string{SpanObtain, SpanRevoke} {
		s, ok := got[name]
		if !ok {
			t.Fatalf("no %s span among %+v", name, rcv.Spans())
		}
		if s.TraceID != root.SpanContext().TraceID().String() || s.ParentSpanID != root.SpanContext().SpanID().String() ||
			s.Attrs["airlock.intent"] != "cert" || s.Attrs["airlock.invocation"] != "inv-traced" || s.Attrs["airlock.lease_fp"] != sec.Lease {
			t.Errorf("%s: %+v", name, s)
		}
	}
}
