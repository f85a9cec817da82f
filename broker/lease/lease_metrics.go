package lease

import "github.com/prometheus/client_golang/prometheus"

// metrics are the leased secrets' metrics. A nil *metrics
// records nothing. Labels are configured intent names and fixed results.
type metrics struct {
	obtained    *prometheus.CounterVec
	errors      *prometheus.CounterVec
	revocations *prometheus.CounterVec
	renewals    *prometheus.CounterVec
}

// newMetrics registers the lease metrics with reg; outstanding and
// failing are read from l when scraped.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		obtained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_leases_obtained_total", Help: "Leases obtained from Vault at a first use, by intent.",
		}, []string{"intent"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_lease_errors_total", Help: "Leases that could not be obtained, by intent.",
		}, []string{"intent"}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_lease_revocations_total",
			Help: "Lease revocation attempts by result: ok, retry (failed, tried again), gave_up (attempts used; retried slowly until the lease expires), expired (died at its TTL unrevoked), lost_race (a replica revoked the lease it obtained second).",
		}, []string{"result"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_lease_renewals_total", Help: "Lease renewals by result (ok, error).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.obtained, m.errors, m.revocations, m.renewals)
	}
	return m
}

// register adds the gauges that read l.
func (m *metrics) register(reg prometheus.Registerer, l *Manager) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_broker_leases_outstanding",
		Help: "Leases this replica obtained that are not revoked yet (in use, or their revocation is pending or failing).",
	}, func() float64 { return float64(l.Outstanding()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_broker_lease_revocations_failing",
		Help: "Leases whose revocation used all its attempts and which are still alive at Vault.",
	}, func() float64 { return float64(l.Failing()) }))
}

func (m *metrics) obtain(intent string, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.errors.WithLabelValues(intent).Inc()
		return
	}
	m.obtained.WithLabelValues(intent).Inc()
}

func (m *metrics) revocation(result string) {
	if m != nil {
		m.revocations.WithLabelValues(result).Inc()
	}
}

func (m *metrics) renewal(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.renewals.WithLabelValues("error").Inc()
		return
	}
	m.renewals.WithLabelValues("ok").Inc()
}
