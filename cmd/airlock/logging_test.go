package main

import (
	"bytes"
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
)

// airlock serve writes its audit lines itself, beside the log, only when
// the log is JSON; with a text log they go through the logger.
func TestAuditOutFollowsTheLogFormat(t *testing.T) {
	var w bytes.Buffer
	for _, tc := range []struct {
		format string
		want   bool
	}{
		{"json", true},
		{"auto", true}, // not a terminal: JSON
		{"text", false},
	} {
		t.Run(tc.format, func(t *testing.T) {
			got := auditOut(config.Log{Format: tc.format, Level: "info"}, &w)
			if (got != nil) != tc.want {
				t.Fatalf("auditOut = %v, want a writer: %v", got, tc.want)
			}
		})
	}
}
