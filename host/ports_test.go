package host_test

import (
	"errors"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/host"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// A compiled port is neither replaced nor removed; an installed one is
// added, looked up while others add, refused and removed.
func TestPortSet(t *testing.T) {
	tickets := ticketsv1.File_numinance_ports_tickets_v1_tickets_proto
	s := host.NewPortSet(tickets)
	if f, ok := s.Lookup("numinance.ports.tickets.v1"); !ok || f != tickets || !s.Compiled("numinance.ports.tickets.v1") {
		t.Fatal("the compiled port is not served")
	}
	if err := s.Add(tickets); !errors.Is(err, host.ErrPortCompiled) {
		t.Fatalf("replace the compiled port: %v", err)
	}
	if _, err := s.Remove("numinance.ports.tickets.v1"); !errors.Is(err, host.ErrPortCompiled) {
		t.Fatalf("remove the compiled port: %v", err)
	}
	other := timestamppb.File_google_protobuf_timestamp_proto // any file: the set keys it by package
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); _ = s.Add(other) }()
		go func() { defer wg.Done(); s.Lookup("google.protobuf"); s.Names() }()
	}
	wg.Wait()
	if _, ok := s.Lookup("google.protobuf"); !ok {
		t.Fatal("an added port is not served")
	}
	s.Refuse("google.protobuf", "changed since install")
	if _, ok := s.Lookup("google.protobuf"); ok || s.Refused()["google.protobuf"] != "changed since install" {
		t.Fatal("a refused port is served, or its reason is lost")
	}
	s.Refuse("numinance.ports.tickets.v1", "x")
	if _, ok := s.Lookup("numinance.ports.tickets.v1"); !ok {
		t.Fatal("a compiled port was refused")
	}
	var none *host.PortSet
	if _, ok := none.Lookup("numinance.ports.tickets.v1"); ok || none.Names() != nil {
		t.Fatal("a nil set serves a port")
	}
}
