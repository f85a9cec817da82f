package host

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A plugin that never started has an airlock_plugin_up series of 0, so
// an alert on it fires; without one it would be absent.
func TestPluginUpSeriesForNeverStarted(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := New(Options{Registerer: reg})
	defer h.Shutdown(context.Background())
	_ = h.Add("never", KindPluginV1, func(context.Context) (Runtime, error) {
		return nil, Permanent(errors.New("binary digest differs"))
	})
	n, err := testutil.GatherAndCount(reg, "airlock_plugin_up")
	if err != nil || n != 1 {
		t.Fatalf("%d airlock_plugin_up series (%v), want 1", n, err)
	}
	if got := testutil.ToFloat64(h.metrics.up.WithLabelValues("never", string(KindPluginV1))); got != 0 {
		t.Fatalf("airlock_plugin_up = %v", got)
	}
}
