package pluginv1

import (
	"context"
	"errors"
	"path"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// The sockets a refusal is counted for.
const (
	socketHostService = "host_service" // the plugin's HostService (h.sock)
	socketProvider    = "provider"     // the provider's own socket, as it reports
)

// RefusedCallsMetric counts calls refused on a plugin's sockets.
const RefusedCallsMetric = "airlock_plugin_refused_calls_total"

// Refusals are logged at most refusalLogBurst at once and then
// refusalLogRate a second per plugin, so that a flood of calls does not
// flood the host's log; the metric counts every one.
const (
	refusalLogRate  = 10
	refusalLogBurst = 50
)

func newRefusalLogLimit() *rate.Limiter { return rate.NewLimiter(refusalLogRate, refusalLogBurst) }

// newRefusedCounter is the refusal counter of reg, registered by the
// first plugin launched with it and shared by every later one. Labels
// are the plugin's installed name and fixed sets: never a value a caller
// sent.
func newRefusedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: RefusedCallsMetric,
		Help: "Calls refused on a plugin/v1 plugin's sockets (host_service: by the host; provider: as the provider reported), by reason."},
		[]string{"plugin", "socket", "reason"})
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
	}
	return c
}

// providerMethods are the PluginService methods by full name: a report
// names one of them or "other".
var providerMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range pb.PluginService_ServiceDesc.Methods {
		m["/"+pb.PluginService_ServiceDesc.ServiceName+"/"+d.MethodName] = true
	}
	for _, d := range pb.PluginService_ServiceDesc.Streams {
		m["/"+pb.PluginService_ServiceDesc.ServiceName+"/"+d.StreamName] = true
	}
	return m
}()

// reported logs and counts a call the provider refused on its own
// socket, as the provider reported it (sdk/plugin does): only the host
// logs, so the provider tells it. The fields are the provider's word:
// the reason must be one of the fixed set, the method one of
// PluginService's (else "other"), and uid and pid decimal numbers (else
// left out).
func (p *Plugin) reported(r *pb.LogRequest) (*pb.LogResponse, error) {
	f := r.GetFields()
	reason := f["reason"]
	if reason != reasonNoKey && reason != reasonWrongKey {
		return nil, status.Error(codes.InvalidArgument, "fields.reason: not a refusal reason")
	}
	rpc := "other"
	if providerMethods[f["rpc"]] {
		rpc = path.Base(f["rpc"])
	}
	attrs := []any{"socket", socketProvider, "rpc", rpc, "reason", reason}
	for _, k := range []string{"caller_uid", "caller_pid"} {
		if n, ok := decimal(f[k]); ok {
			attrs = append(attrs, k, n)
		}
	}
	if p.refusalLog.Allow() {
		p.log.Warn("plugin/v1: the provider refused a call that did not carry its host's key (as the provider reports; "+
			"uid and pid as its namespaces show them)", attrs...)
	}
	p.refused.WithLabelValues(p.inst.Name, socketProvider, reason).Inc()
	return &pb.LogResponse{}, nil
}

// isReport: the Log call is marked as a refusal report.
func isReport(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(plugin.ReportMetadata)
	return len(v) == 1 && v[0] == plugin.ReportRefused
}

// decimal parses a uid or pid: at most 10 digits.
func decimal(s string) (int, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}
