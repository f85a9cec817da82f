package broker

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// withRegions adds intents with regions to f's broker: eu.api lives in
// eu-west-1 with one destination overridden to us-east-1; noregion.api
// names none.
func withRegions(f *memFixture) {
	ref := SecretRef{Source: SourceFile, Path: "example/api", Field: "token"}
	hdr := Inject{Kind: &HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}
	intents := maps.Clone(f.cfg.Intents)
	intents["eu.api"] = Intent{Class: ClassRead, Secret: ref, Inject: hdr, Region: "eu-west-1",
		Destinations: []Destination{{Host: "api.example.com", Port: 443, PathPrefix: "/us/", Region: "us-east-1"}, {Host: "api.example.com", Port: 443, PathPrefix: "/"}}}
	intents["noregion.api"] = Intent{Class: ClassRead, Secret: ref, Inject: hdr}
	f.b.SetIntents(intents)
}

// Issue refuses an intent outside the request's residency, and one
// without a region under any residency, with residency_violation.
func TestIssueResidency(t *testing.T) {
	f := newMemFixture(t)
	withRegions(f)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		intent    string
		residency []string
		wantErr   error
	}{
		{"no residency", "noregion.api", nil, nil},
		{"region inside", "eu.api", []string{"us-east-1", "eu-west-1"}, nil},
		{"region outside", "eu.api", []string{"us-east-1"}, ErrResidencyViolation},
		{"no region under a residency", "noregion.api", []string{"eu-west-1"}, ErrResidencyViolation},
		{"malformed region", "eu.api", []string{"EU West"}, ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-" + tc.name, Intent: tc.intent,
				Destinations: apiDest, Deadline: f.clk.Now().Add(time.Minute), Residency: tc.residency})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Issue: %v, want %v", err, tc.wantErr)
			}
			if reason, _ := Reason(err); tc.wantErr == ErrResidencyViolation && reason != "residency_violation" {
				t.Fatalf("reason %q", reason)
			}
		})
	}
}

// An intent region and a destination region are decoded and validated;
// the destination's overrides the intent's for the places it covers.
func TestIntentRegionConfig(t *testing.T) {
	var in Intent
	src := `class: read
region: eu-west-1
destinations:
  - {host: api.example.com, path_prefix: /us/, region: us-east-1}
  - https://api.example.com/
`
	if err := yaml.Unmarshal([]byte(src), &in); err != nil {
		t.Fatal(err)
	}
	if got := in.RegionOf("api.example.com", 443, "/us/x"); got != "us-east-1" {
		t.Fatalf("override: %q", got)
	}
	if got := in.RegionOf("api.example.com", 443, "/eu/x"); got != "eu-west-1" {
		t.Fatalf("intent region: %q", got)
	}
	cfg := testConfig(writeSecrets(t, "example/api: {token: x}\n"))
	bad := cfg.Intents["example.bound"]
	bad.Region = "EU_West"
	bad.Destinations = []Destination{{Host: "api.example.com", Port: 443, PathPrefix: "/", Region: strings.Repeat("a", 33)}}
	cfg.Intents["example.bound"] = bad
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "broker.intents.example.bound.region") ||
		!strings.Contains(err.Error(), "broker.intents.example.bound.destinations[0].region") {
		t.Fatalf("Validate: %v", err)
	}
}
