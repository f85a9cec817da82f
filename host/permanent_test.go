package host

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A launch failure a runtime marks Permanent fails the plugin at once,
// with no restart spent, and keeps its text and chain; an unmarked one
// is retried.
func TestPermanentLaunchFailure(t *testing.T) {
	errDrift := errors.New("provider manifest differs from the installed one")
	h := New(Options{Restart: RestartPolicy{Base: time.Hour, Max: time.Hour, Budget: 3, ResetAfter: time.Hour}})
	defer h.Shutdown(context.Background())
	for _, tt := range []struct {
		name      string
		err       error
		wantState State
	}{
		{"permanent", Permanent(errDrift), StateFailed},
		{"transient", errDrift, StateRestarting},
		{"manifest-invalid", ErrManifestInvalid, StateFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := h.Add(tt.name, KindPluginV1, func(context.Context) (Runtime, error) { return nil, tt.err })
			if !errors.Is(err, tt.err) || err.Error() != tt.err.Error() {
				t.Fatalf("Add: %v, want %v unchanged", err, tt.err)
			}
			var s Status
			for _, st := range h.Status() {
				if st.Name == tt.name {
					s = st
				}
			}
			if s.State != tt.wantState || s.Restarts != 0 {
				t.Fatalf("status %+v, want %s with no restart", s, tt.wantState)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}
