package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A reload's intents apply at once: a new intent issues, a removed one is
// unknown, and a handle issued before resolves to the new binding.
func TestSetIntents(t *testing.T) {
	ctx := context.Background()
	f := newMemFixture(t)
	before := f.issue(t, "p", "inv-1", "example.read")

	next := testConfig(f.cfg.Secrets.File)
	next.Intents["example.added"] = next.Intents["example.read"]
	delete(next.Intents, "example.write")
	in := next.Intents["example.read"]
	in.Inject = Inject{Kind: &HeaderInject{Name: "X-Api-Key", Template: "{{secret}}"}}
	next.Intents["example.read"] = in
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	f.b.SetIntents(next.Intents)

	f.issue(t, "p", "inv-2", "example.added")
	_, err := f.b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-3", Intent: "example.write",
		Destinations: apiDest, Deadline: f.clk.Now().Add(time.Minute)})
	if !errors.Is(err, ErrIntentUnknown) {
		t.Fatalf("an intent the reload removed: %v, want ErrIntentUnknown", err)
	}
	g, err := f.b.Resolve(ctx, before.Handle)
	if err != nil {
		t.Fatal(err)
	}
	bound, ok := f.b.Intent(g.Intent)
	if h, isHeader := bound.Inject.Kind.(*HeaderInject); !ok || !isHeader || h.Name != "X-Api-Key" {
		t.Fatalf("a handle issued before the reload injects %#v, want the new binding's X-Api-Key header", bound.Inject.Kind)
	}
	if names := f.b.IntentNames(); len(names) != 4 {
		t.Fatalf("intents after the reload: %v", names)
	}
}
