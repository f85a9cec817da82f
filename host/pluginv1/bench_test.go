package pluginv1

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// BenchmarkColdStart: exec to ready (line, Handshake, GetManifest,
// GetDescriptors) for the Go sample provider. Goal: <= 100 ms.
func BenchmarkColdStart(b *testing.B) {
	f := newHostFixture(b)
	ctx := context.Background()
	for b.Loop() {
		p, err := Launch(ctx, f.inst, f.opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p.Shutdown(ctx)
		b.StartTimer()
	}
}

// BenchmarkInvoke is a full Invoke (policy, envelope, stream checks,
// outcome, revocation) of a method that answers at once, without evidence
// (BenchmarkInvokeWithEvidence adds the fsync'd evidence records).
// BenchmarkRawUnary is a plain unary RPC on the same socket. Goal: Invoke
// <= 2x the raw call.
func BenchmarkInvoke(b *testing.B) { benchInvoke(b, false) }

func BenchmarkInvokeWithEvidence(b *testing.B) { benchInvoke(b, true) }

func benchInvoke(b *testing.B, evidence bool) {
	f := newHostFixture(b)
	opts := f.opts
	if !evidence {
		opts.Evidence = nil
	}
	ctx := context.Background()
	p, err := Launch(ctx, f.install(b, badBin, "ok"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(ctx)
	req := host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/ListTickets", Input: &ticketsv1.ListTicketsRequest{},
		Deadline: time.Now().Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		out, err := p.Invoke(ctx, req)
		if err != nil || out.Status != host.CallSucceeded {
			b.Fatalf("%v %v", out, err)
		}
	}
}

func BenchmarkRawUnary(b *testing.B) {
	f := newHostFixture(b)
	ctx := context.Background()
	p, err := Launch(ctx, f.install(b, badBin, "ok"), f.opts)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(ctx)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.client.Health(ctx, &pb.HealthRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}
