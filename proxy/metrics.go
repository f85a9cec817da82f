package proxy

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus metrics; nil records nothing.
type metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	upstream   prometheus.Histogram
	bytes      *prometheus.CounterVec
	redactions prometheus.Counter
	retries    prometheus.Counter

	tokenFetches *prometheus.CounterVec
	// foreignCreds counts other plugins' credentials refused on a
	// plugin's own listener, by the plugin that sent them.
	foreignCreds *prometheus.CounterVec
	// violations counts violations by kind and whether the ledger
	// recorded them (enforce.go).
	violations *prometheus.CounterVec
	// addrClasses counts requests by what the address policy made of
	// their upstream address (address.go), one series per class.
	addrClasses [numAddrClasses]prometheus.Counter

	// The series every allowed request touches, looked up once:
	// WithLabelValues hashes its labels and takes a lock on each call.
	allowedByIntent sync.Map // intent -> prometheus.Counter
	allowedDuration prometheus.Observer
	deniedDuration  prometheus.Observer
	responseBytes   prometheus.Counter
}

// tokenFetch counts an access-token fetch and its result.
func (m *metrics) tokenFetch(intent, result string) {
	if m != nil {
		m.tokenFetches.WithLabelValues(intent, result).Inc()
	}
}

// violation counts a violation of kind; recorded: the ledger took it.
func (m *metrics) violation(kind string, recorded bool) {
	if m != nil {
		m.violations.WithLabelValues(kind, map[bool]string{true: "true", false: "false"}[recorded]).Inc()
	}
}

// foreign counts another plugin's credential refused on plugin's own
// listener.
func (m *metrics) foreign(plugin string) {
	if m != nil {
		m.foreignCreds.WithLabelValues(plugin).Inc()
	}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_proxy_requests_total", Help: "Proxied requests by decision (allow, deny), code and intent.",
		}, []string{"decision", "code", "intent"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_proxy_request_duration_seconds", Help: "Time from request to end of response, by decision.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"decision"}),
		upstream: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "airlock_proxy_upstream_duration_seconds", Help: "Time to the upstream's response headers.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_proxy_bytes_total", Help: "Body bytes proxied, by direction (request, response).",
		}, []string{"direction"}),
		redactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_proxy_echo_redactions_total", Help: "Echoed secrets the echo guard redacted from responses.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_proxy_rotation_retries_total", Help: "Requests retried once with a newer secret version after a 401/403.",
		}),
		tokenFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_proxy_token_fetches_total",
			Help: "Access-token fetches of the OAuth2 processors, by intent and result (ok, or the refusal code).",
		}, []string{"intent", "result"}),
	}
	m.foreignCreds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_proxy_handle_not_this_plugins_total",
		Help: "Handles and passes of another plugin presented on a plugin's own proxy listener and refused, by the plugin that presented them.",
	}, []string{"plugin"})
	m.violations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_proxy_violations_total",
		Help: "Refusals that are violations (a handle used for what it was not given), by kind, and whether the ledger recorded them.",
	}, []string{"kind", "recorded"})
	addrs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_proxy_upstream_addresses_total",
		Help: "Requests by the class of their upstream address: allow.default, allow.configured (allow_cidrs), or the deny class that refused it.",
	}, []string{"class"})
	for c := addrAllowDefault; c < numAddrClasses; c++ {
		m.addrClasses[c] = addrs.WithLabelValues(c.String())
	}
	reg.MustRegister(m.requests, m.duration, m.upstream, m.bytes, m.redactions, m.retries, m.tokenFetches, m.foreignCreds, m.violations, addrs)
	m.allowedDuration = m.duration.WithLabelValues("allow")
	m.deniedDuration = m.duration.WithLabelValues("deny")
	m.responseBytes = m.bytes.WithLabelValues("response")
	return m
}

func (m *metrics) done(a *auditRecord) {
	if m == nil {
		return
	}
	if a.Code == "" {
		m.allowed(a.Intent).Inc()
		m.allowedDuration.Observe(a.total.Seconds())
	} else {
		m.requests.WithLabelValues("deny", a.Code, a.Intent).Inc()
		m.deniedDuration.Observe(a.total.Seconds())
	}
	if a.UpstreamMS > 0 {
		m.upstream.Observe(a.UpstreamMS / 1000)
	}
	m.responseBytes.Add(float64(a.BytesOut))
	if a.Redactions > 0 {
		m.redactions.Add(float64(a.Redactions))
	}
	if a.Retried {
		m.retries.Inc()
	}
	if a.AddrClass != addrUnknown {
		m.addrClasses[a.AddrClass].Inc()
	}
}

// allowed is the allowed-requests counter of intent. Intents come from
// the configuration, so the cache is bounded by it.
func (m *metrics) allowed(intent string) prometheus.Counter {
	if c, ok := m.allowedByIntent.Load(intent); ok {
		return c.(prometheus.Counter)
	}
	c := m.requests.WithLabelValues("allow", "", intent)
	m.allowedByIntent.Store(intent, c)
	return c
}
