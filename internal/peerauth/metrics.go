//go:build linux

package peerauth

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// refusals counts every caller a local API socket turned away, by socket
// (UnixOptions.Name, "broker API", …) and reason ("peer_uid", "token", …).
// One process-wide counter: each process registers it once in its own
// registry (RegisterMetrics), and a collector may sit in several.
var refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "airlock_local_api_refusals_total",
	Help: "Callers a local API socket (broker, handoff, control, a plugin's HostService or provider) refused, by socket and reason.",
}, []string{"socket", "reason"})

// Refused counts one refusal at socket for reason. The log line that goes
// with it is the caller's to write, with the Peer's uid and pid.
func Refused(socket, reason string) { refusals.WithLabelValues(socket, reason).Inc() }

// RegisterMetrics adds the refusal counter to reg (nil: nothing). A
// registry that holds it already is left as it is.
func RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	err := reg.Register(refusals)
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil
	}
	return err
}
