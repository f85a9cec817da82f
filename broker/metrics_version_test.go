package broker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The secret version gauge follows each intent's last version, the
// labelled gauge found once per intent.
func TestSecretVersionGauge(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.version("api.read", 3)
	m.version("api.write", 1)
	m.version("api.read", 4)
	for intent, want := range map[string]float64{"api.read": 4, "api.write": 1} {
		if got := testutil.ToFloat64(m.secretVersion.WithLabelValues(intent)); got != want {
			t.Errorf("%s: version %v, want %v", intent, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.version("api.read", 5) }); n != 0 {
		t.Errorf("setting a known intent's version allocates %v times", n)
	}
	var none *Metrics
	none.version("api.read", 1) // records nothing, does not panic
}
