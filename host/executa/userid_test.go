package executa

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
)

// The user_id of an Executa call's tokens is who the call is for: the
// stated user, else the principal that asked — never a value the caller
// typed for itself. Run through the adapter against a real plugin, and
// read back from the sampling token it was given.
func TestUserIDIsTheActorOrTheCaller(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	rt := &runtime{p: p, record: func(string, string, map[string]any) error { return nil }}
	alice := host.Principal{ID: "jwt:https://idp.example#alice-svc", Method: "jwt"}
	for i, tc := range []struct {
		name   string
		caller host.Principal
		actor  host.Actor
		want   string
	}{
		{"stated user", alice, host.Actor{Kind: "user", Principal: "bob"}, "bob"},
		{"stated service", alice, host.Actor{Kind: "service", Principal: "billing"}, alice.ID},
		{"no stated actor", alice, host.Actor{Kind: "principal", Principal: alice.ID}, alice.ID},
		{"a Go caller that names no one", host.Principal{}, host.Actor{}, "local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act, err := rt.Prepare(host.InvokeRequest{Method: "context", JSON: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			out := act.Run(ctx, host.Call{ID: fmt.Sprintf("%032x", i+1), Deadline: time.Now().Add(time.Minute),
				Caller: tc.caller, Actor: tc.actor})
			if out.Status != host.CallSucceeded {
				t.Fatalf("call: %s %s", out.Status, out.Reason)
			}
			var d map[string]any
			if err := json.Unmarshal(out.Data, &d); err != nil {
				t.Fatal(err)
			}
			tok, _ := d["sampling_token"].(string)
			sc, err := f.verifier.VerifySampling(ctx, tok)
			if err != nil || sc.UserID != tc.want {
				t.Fatalf("sampling token user_id %q (%v), want %q", sc.UserID, err, tc.want)
			}
		})
	}
}
