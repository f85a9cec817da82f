package pluginv1

import (
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// Every plugin/v1 value the adapter maps reaches the host as the host's
// own, under the name evidence records carry; a value the host does not
// know fails closed (FAILED, unspecified risk).
func TestAdapterMapsToHostTypes(t *testing.T) {
	for c := range pb.RiskClass_name {
		rc := pb.RiskClass(c)
		if got := riskOf(rc).String(); got != rc.String() {
			t.Errorf("riskOf(%s) = %s", rc, got)
		}
	}
	if got := riskOf(pb.RiskClass(99)); got != policy.RiskUnspecified {
		t.Errorf("unknown risk class: %s", got)
	}
	for _, tt := range []struct {
		in   pb.Status
		want host.CallStatus
	}{
		{pb.Status_STATUS_SUCCEEDED, host.CallSucceeded},
		{pb.Status_STATUS_FAILED, host.CallFailed},
		{pb.Status_STATUS_PARTIAL, host.CallPartial},
		{pb.Status_STATUS_CANCELLED, host.CallCancelled},
		{pb.Status_STATUS_RUNNING, host.CallFailed},
		{pb.Status_STATUS_UNSPECIFIED, host.CallFailed},
		{pb.Status(77), host.CallFailed},
	} {
		if got := callStatus(tt.in); got != tt.want {
			t.Errorf("callStatus(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if tt.want != host.CallFailed && string(tt.want) != tt.in.String() {
			t.Errorf("%s is named %s in evidence, was %s", tt.in, tt.want, tt.in.String())
		}
	}
	d := diagnosticsOf([]*pb.Diagnostic{{Code: "c", Message: "m", Path: "p"}})
	if len(d) != 1 || d[0] != (host.Diagnostic{Code: "c", Message: "m", Path: "p"}) || diagnosticsOf(nil) != nil {
		t.Errorf("diagnostics: %+v", d)
	}
	if actorOf(host.Actor{}) != nil {
		t.Error("the zero Actor is sent as an actor")
	}
	if a := actorOf(host.Actor{Kind: "control-api", Principal: "local"}); a.GetKind() != "control-api" || a.GetPrincipal() != "local" {
		t.Errorf("actor: %v", a)
	}
}
