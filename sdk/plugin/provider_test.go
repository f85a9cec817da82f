package plugin

import (
	"context"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// Provider's answers follow from its fields: the negotiated version, the
// manifest as given, each port file and import once, SERVING.
func TestProviderAnswers(t *testing.T) {
	m := &pluginv1.Manifest{Name: "n", Version: "1", CredentialIntents: []*pluginv1.CredentialIntent{{Name: "r", Class: "read",
		Destinations: []*pluginv1.Destination{{Host: "api.example.com", Port: 443, PathPrefix: "/v1/"}}}}}
	tickets := ticketsv1.File_numinance_ports_tickets_v1_tickets_proto
	p := &Provider{Runtime: &Runtime{Version: 1}, Manifest: m, Ports: []protoreflect.FileDescriptor{tickets, tickets}}
	ctx := context.Background()
	if hs, _ := p.Handshake(ctx, nil); hs.GetProtocolVersion() != 1 || hs.GetSpecVersion() != SpecVersion {
		t.Fatalf("handshake: %v", hs)
	}
	if got, _ := p.GetManifest(ctx, nil); got != m {
		t.Fatal("GetManifest is not the manifest")
	}
	set, _ := p.GetDescriptors(ctx, nil)
	if want := len(DescriptorSet(tickets).GetFile()); len(set.GetFile()) != want {
		t.Fatalf("GetDescriptors: %d files, want %d (each once)", len(set.GetFile()), want)
	}
	if h, _ := p.Health(ctx, nil); h.GetStatus() != pluginv1.HealthStatus_HEALTH_STATUS_SERVING {
		t.Fatalf("health: %v", h)
	}
	if got := BaseURL(m, "r"); got != "http://api.example.com:443/v1/" {
		t.Fatalf("BaseURL = %q", got)
	}
	if got := BaseURL(m, "w"); got != "" {
		t.Fatalf("BaseURL of an undeclared intent = %q", got)
	}
	if r := Failed("upstream_500"); r.GetStatus() != pluginv1.Status_STATUS_FAILED || r.GetDiagnostics()[0].GetCode() != "upstream_500" {
		t.Fatalf("Failed: %v", r)
	}
	r, err := Succeeded(&ticketsv1.Ticket{Id: "T-1"}, pluginv1.SideEffect_SIDE_EFFECT_READ, "ev-1")
	if err != nil || r.GetResult().GetTypeUrl() != "type.googleapis.com/numinance.ports.tickets.v1.Ticket" || r.GetEvidenceIds()[0] != "ev-1" {
		t.Fatalf("Succeeded: %v %v", r, err)
	}
}
