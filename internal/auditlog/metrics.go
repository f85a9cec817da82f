package auditlog

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	dropped prometheus.Counter
	waits   prometheus.Counter
	batches prometheus.Counter
}

// newMetrics registers w's metrics; the queue's size is read when scraped,
// not set on every line.
func newMetrics(reg prometheus.Registerer, w *Writer) metrics {
	m := metrics{
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_audit_lines_dropped_total",
			Help: "Audit lines never written: the audit output stalled longer than the wait bound, or failed. Alert on any increase."}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_audit_queue_full_waits_total",
			Help: "Requests that waited for room in the audit queue (the audit output is slower than the proxy)."}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_audit_writes_total",
			Help: "Write calls to the audit output (each writes a batch of lines)."}),
	}
	if reg != nil {
		queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_audit_queued_bytes",
			Help: "Bytes of audit lines waiting for the audit output."}, func() float64 {
			w.mu.Lock()
			defer w.mu.Unlock()
			return float64(len(w.queue))
		})
		reg.MustRegister(m.dropped, m.waits, m.batches, queued)
	}
	return m
}
