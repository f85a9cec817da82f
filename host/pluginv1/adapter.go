package pluginv1

import (
	"context"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// The adapter: plugin/v1's protobuf types become the host's own at this
// package's edge, so the registry, supervisor, invoke path, policy and
// control API never see them.

var _ host.Runtime = (*Plugin)(nil)

// AddProvider registers an installed plugin/v1 provider with h and
// launches it under h's supervisor (see host.Host.Add).
func AddProvider(h *host.Host, inst Installed) error {
	return h.Add(inst.Name, host.KindPluginV1, func(ctx context.Context) (host.Runtime, error) {
		return launchRuntime(ctx, inst, h.Options())
	})
}

// launchRuntime launches a provider for the supervisor: a failure a
// restart cannot fix is marked permanent.
func launchRuntime(ctx context.Context, inst Installed, opts host.Options) (host.Runtime, error) {
	p, err := Launch(ctx, inst, opts)
	if err != nil {
		if isPermanent(err) {
			return nil, host.Permanent(err)
		}
		return nil, err
	}
	return p, nil
}

// riskOf maps a port rule's risk class to the policy's; a class this host
// does not know is unspecified, which only a rule naming "unspecified"
// matches (the host compiles the port files, so a provider cannot send
// one).
func riskOf(c pb.RiskClass) policy.Risk {
	switch c {
	case pb.RiskClass_RISK_CLASS_READ:
		return policy.RiskRead
	case pb.RiskClass_RISK_CLASS_LOW:
		return policy.RiskLow
	case pb.RiskClass_RISK_CLASS_WRITE:
		return policy.RiskWrite
	case pb.RiskClass_RISK_CLASS_PRIVILEGED:
		return policy.RiskPrivileged
	default:
		return policy.RiskUnspecified
	}
}

// callStatus maps a terminal status the stream check let through; anything
// else ends the call FAILED (the stream check refuses it first).
func callStatus(s pb.Status) host.CallStatus {
	switch s {
	case pb.Status_STATUS_SUCCEEDED:
		return host.CallSucceeded
	case pb.Status_STATUS_PARTIAL:
		return host.CallPartial
	case pb.Status_STATUS_CANCELLED:
		return host.CallCancelled
	default:
		return host.CallFailed
	}
}

func diagnosticsOf(ds []*pb.Diagnostic) []host.Diagnostic {
	if len(ds) == 0 {
		return nil
	}
	out := make([]host.Diagnostic, len(ds))
	for i, d := range ds {
		out[i] = host.Diagnostic{Code: d.GetCode(), Message: d.GetMessage(), Path: d.GetPath()}
	}
	return out
}

// actorOf is the call's actor in the ActionContext; none for the zero
// Actor.
func actorOf(a host.Actor) *pb.Actor {
	if a == (host.Actor{}) {
		return nil
	}
	return &pb.Actor{Kind: a.Kind, Principal: a.Principal}
}
