package main

import (
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// handle inspect names a leased intent's lease by state and fingerprint.
func TestLeaseLine(t *testing.T) {
	exp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		in   broker.LeaseState
		want string
	}{
		{"none", broker.LeaseState{State: broker.LeaseStateNone}, "none (obtained at the invocation's first use)"},
		{"active", broker.LeaseState{State: broker.LeaseStateActive, Fingerprint: "0123456789abcdef", ExpiresAt: exp, Renewable: true},
			"active lease_fp 0123456789abcdef, expires at 2026-01-02T03:04:05Z, renewable"},
		{"ended", broker.LeaseState{State: broker.LeaseStateEnded, Fingerprint: "0123456789abcdef", ExpiresAt: exp},
			"ended lease_fp 0123456789abcdef, expires at 2026-01-02T03:04:05Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leaseLine(tt.in); got != tt.want {
				t.Fatalf("leaseLine = %q, want %q", got, tt.want)
			}
		})
	}
}
