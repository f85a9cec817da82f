package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The broker API trusts no size: oversized ids and destination lists are
// refused as bad requests before anything is stored.
func TestIssueRefusesOversizedRequests(t *testing.T) {
	f := newMemFixture(t)
	b := f.b
	ok := IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read", Deadline: f.clk.Now().Add(time.Minute),
		Destinations: []Destination{{Host: "api.example.com"}}}
	many := make([]Destination, MaxDestinations+1)
	for i := range many {
		many[i] = Destination{Host: "api.example.com"}
	}
	for name, mutate := range map[string]func(*IssueRequest){
		"3 MiB plugin id":      func(r *IssueRequest) { r.PluginID = strings.Repeat("p", 3<<20) },
		"1 MiB invocation id":  func(r *IssueRequest) { r.InvocationID = strings.Repeat("i", 1<<20) },
		"long intent":          func(r *IssueRequest) { r.Intent = strings.Repeat("x", MaxIDBytes+1) },
		"100,000 destinations": func(r *IssueRequest) { r.Destinations = make([]Destination, 100000) },
		"65 destinations":      func(r *IssueRequest) { r.Destinations = many },
		"huge path prefix": func(r *IssueRequest) {
			r.Destinations = []Destination{{Host: "api.example.com", PathPrefix: "/" + strings.Repeat("a", 2000)}}
		},
		"long method": func(r *IssueRequest) {
			r.Destinations = []Destination{{Host: "api.example.com", Methods: []string{strings.Repeat("G", MaxMethodBytes+1)}}}
		},
		"long renew":       func(r *IssueRequest) { r.Renew = strings.Repeat("r", MaxIDBytes+1) },
		"long pass intent": func(r *IssueRequest) { r.PassIntents = []string{strings.Repeat("x", MaxIDBytes+1)} },
		"too many methods": func(r *IssueRequest) {
			r.Destinations = []Destination{{Host: "api.example.com", Methods: make([]string, MaxMethods+1)}}
		},
	} {
		req := ok
		mutate(&req)
		if _, err := b.Issue(context.Background(), req); !errors.Is(err, ErrBadRequest) || len(err.Error()) > 200 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := b.Issue(context.Background(), ok); err != nil {
		t.Fatalf("a request within the bounds: %v", err)
	}
}
