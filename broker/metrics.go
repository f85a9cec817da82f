package broker

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the broker's Prometheus metrics. A nil *Metrics records
// nothing. No label ever holds a handle, a secret or plugin-supplied text:
// intents are the configured names, results a fixed set.
type Metrics struct {
	issued        *prometheus.CounterVec
	issueErrors   *prometheus.CounterVec
	resolveOK     prometheus.Counter
	resolveUnk    prometheus.Counter
	resolveExp    prometheus.Counter
	resolveRev    prometheus.Counter
	resolveErr    prometheus.Counter
	revoked       *prometheus.CounterVec
	reads         *prometheus.CounterVec
	readErrors    *prometheus.CounterVec
	hits, misses  prometheus.Counter
	stale         prometheus.Counter
	secretVersion *prometheus.GaugeVec
	versions      sync.Map // intent → its secretVersion gauge, looked up once
	minted        *prometheus.CounterVec
	owed          prometheus.Gauge
	owedEvents    *prometheus.CounterVec
}

// NewMetrics registers the broker metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	resolves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_broker_resolves_total", Help: "Handle resolutions by result.",
	}, []string{"result"})
	m := &Metrics{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_handles_issued_total", Help: "Handles issued, by intent.",
		}, []string{"intent"}),
		issueErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_issue_errors_total", Help: "Refused or failed issues, by reason.",
		}, []string{"reason"}),
		minted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_tokens_minted_total", Help: "Executa tokens minted over the broker API, by audience.",
		}, []string{"audience"}),
		resolveOK:  resolves.WithLabelValues("ok"),
		resolveUnk: resolves.WithLabelValues("unknown"),
		resolveExp: resolves.WithLabelValues("expired"),
		resolveRev: resolves.WithLabelValues("revoked"),
		resolveErr: resolves.WithLabelValues("error"),
		revoked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_handles_revoked_total", Help: "Handles revoked, by what was revoked (invocation, plugin).",
		}, []string{"scope"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_secret_reads_total", Help: "Reads from a secret source (cache misses that reached it).",
		}, []string{"source"}),
		readErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_secret_read_errors_total", Help: "Failed reads from a secret source.",
		}, []string{"source"}),
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_secret_cache_hits_total", Help: "Secret fetches served from the cache.",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_secret_cache_misses_total", Help: "Secret fetches that went to the source.",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_secret_stale_served_total", Help: "Expired cache entries served because the source failed (stale_if_error).",
		}),
		owed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "airlock_broker_revocations_owed",
			Help: "Revocations this replica accepted that the handle store has not acknowledged (refused here, retried).",
		}),
		owedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_broker_owed_revocations_total",
			Help: "Owed revocations by event: owed (the store did not acknowledge), landed (a retry did), expired (what it covered expired first).",
		}, []string{"event"}),
		secretVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "airlock_secret_version", Help: "Version of the secret last used for each intent (never the value).",
		}, []string{"intent"}),
	}
	if reg != nil {
		reg.MustRegister(m.issued, m.issueErrors, resolves, m.revoked, m.reads, m.readErrors, m.hits, m.misses, m.stale, m.secretVersion, m.minted,
			m.owed, m.owedEvents)
	}
	return m
}

// Minted counts a token minted for audience (a fixed pair of names).
func (m *Metrics) Minted(audience string) {
	if m != nil {
		m.minted.WithLabelValues(audience).Inc()
	}
}

func (m *Metrics) issue(intent string) {
	if m != nil {
		m.issued.WithLabelValues(intent).Inc()
	}
}

func (m *Metrics) issueError(reason string) {
	if m != nil {
		m.issueErrors.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) resolve(err error) {
	if m == nil {
		return
	}
	switch err {
	case nil:
		m.resolveOK.Inc()
	case ErrHandleUnknown:
		m.resolveUnk.Inc()
	case ErrHandleExpired:
		m.resolveExp.Inc()
	case ErrHandleRevoked:
		m.resolveRev.Inc()
	default:
		m.resolveErr.Inc()
	}
}

func (m *Metrics) revoke(scope string, n int) {
	if m != nil {
		m.revoked.WithLabelValues(scope).Add(float64(n))
	}
}

func (m *Metrics) sourceRead(source string) {
	if m != nil {
		m.reads.WithLabelValues(source).Inc()
	}
}

func (m *Metrics) sourceError(source string) {
	if m != nil {
		m.readErrors.WithLabelValues(source).Inc()
	}
}

func (m *Metrics) cacheHit() {
	if m != nil {
		m.hits.Inc()
	}
}

func (m *Metrics) cacheMiss() {
	if m != nil {
		m.misses.Inc()
	}
}

func (m *Metrics) staleServed() {
	if m != nil {
		m.stale.Inc()
	}
}

// version sets intent's secret version gauge. It runs on every request
// the proxy forwards: the labelled gauge is found once per intent
// (intents come from the configuration, so the memo is bounded).
func (m *Metrics) version(intent string, v int) {
	if m == nil {
		return
	}
	g, ok := m.versions.Load(intent)
	if !ok {
		g, _ = m.versions.LoadOrStore(intent, m.secretVersion.WithLabelValues(intent))
	}
	g.(prometheus.Gauge).Set(float64(v))
}

// owedRevocation counts an owed revocation's event and sets the gauge of
// those owed now.
func (m *Metrics) owedRevocation(event string, owed int) {
	if m != nil {
		m.owedEvents.WithLabelValues(event).Inc()
		m.owed.Set(float64(owed))
	}
}
