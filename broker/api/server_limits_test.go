package api

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/internal/brokertest"
	"github.com/airlock-dev/airlock/internal/peerauth"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
)

// serveAPIOf serves srv on a unix socket with its bounds (no token check:
// the bounds are under test) and returns a dialer of raw client
// connections (closed at cleanup).
func serveAPIOf(t *testing.T, srv *Service) func() brokerv1.BrokerServiceClient {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "broker.sock")
	l, err := peerauth.ListenUnix(sock, peerauth.UnixOptions{GID: peerauth.NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(srv.ServerOptions()...)
	srv.Register(g)
	done := make(chan struct{})
	go func() { _ = g.Serve(l); close(done) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return func() brokerv1.BrokerServiceClient {
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return brokerv1.NewBrokerServiceClient(conn)
	}
}

// largestIssue is an IssueHandleRequest with every list and field at the
// bounds Issue accepts.
func largestIssue(deadline time.Time) *brokerv1.IssueHandleRequest {
	r := &brokerv1.IssueHandleRequest{PluginId: strings.Repeat("p", broker.MaxIDBytes), InvocationId: strings.Repeat("i", broker.MaxIDBytes),
		Intent: "example.read", Deadline: timestamppb.New(deadline),
		RunId: strings.Repeat("r", broker.MaxIDBytes), AccessGrantId: strings.Repeat("g", broker.MaxIDBytes), OnViolation: broker.OnViolationQuarantine}
	for i := 0; i < broker.MaxBudgetLines; i++ {
		r.Budget = append(r.Budget, &brokerv1.HandleBudgetLine{Key: strings.Repeat("k", broker.MaxBudgetKey-1) + string(rune('0'+i)), Calls: math.MaxInt64,
			CostMicros: math.MaxInt64, EgressRequests: math.MaxInt64, EgressBytes: math.MaxInt64, Tokens: math.MaxInt64})
	}
	for i := 0; i < broker.MaxResidency; i++ {
		r.Residency = append(r.Residency, strings.Repeat("z", broker.MaxRegionBytes))
	}
	methods := make([]string, broker.MaxMethods)
	for i := range methods {
		methods[i] = strings.Repeat("M", broker.MaxMethodBytes-2) + string(rune('A'+i/10)) + string(rune('A'+i%10))
	}
	host := "api.example.com"
	for i := 0; i < broker.MaxDestinations; i++ {
		r.Destinations = append(r.Destinations, &brokerv1.Destination{Host: host, Port: 65535,
			PathPrefix: "/" + strings.Repeat("a", broker.MaxDestinationBytes-len(host)-1), Methods: methods})
	}
	return r
}

// The broker API refuses a request larger than the largest legitimate
// one before decoding it (ResourceExhausted), refuses oversized metadata,
// and still serves the largest legitimate request. On the old code a
// 100,000-destination request (4 MiB allowed) was decoded in full and
// 1 MiB of metadata was accepted.
func TestAPIRefusesOversizedRequests(t *testing.T) {
	f := newMemFixture(t)
	api := serveAPIOf(t, &Service{Broker: f.b})()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	largest := largestIssue(time.Now().Add(time.Minute))
	for _, in := range []string{strings.Repeat("x", broker.MaxIDBytes)} {
		for i := 0; i < broker.MaxDestinations; i++ {
			largest.PassIntents = append(largest.PassIntents, in)
		}
	}
	largest.Renew = strings.Repeat("r", broker.MaxIDBytes)
	if n := proto.Size(largest); n > maxRequestBytes {
		t.Fatalf("the largest legitimate request is %d bytes, over maxRequestBytes %d", n, maxRequestBytes)
	}
	// Issued, it needs no pass fields, and no residency its intent (which
	// names no region) is outside.
	largest.PassIntents, largest.Renew, largest.Residency = nil, "", nil
	if _, err := api.IssueHandle(ctx, largest); err != nil {
		t.Fatalf("the largest legitimate issue request: %v", err)
	}

	huge := &brokerv1.IssueHandleRequest{PluginId: "p", InvocationId: "inv", Intent: "example.read"}
	for i := 0; i < 100000; i++ {
		huge.Destinations = append(huge.Destinations, &brokerv1.Destination{Host: "api.example.com"})
	}
	if _, err := api.IssueHandle(ctx, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a %d-byte request: %v, want ResourceExhausted", proto.Size(huge), err)
	}

	md := metadata.Pairs("x-filler", strings.Repeat("m", 1<<20))
	if _, err := api.Status(metadata.NewOutgoingContext(ctx, md), &brokerv1.StatusRequest{}); err == nil {
		t.Fatal("1 MiB of metadata was accepted")
	}
	if _, err := api.Status(ctx, &brokerv1.StatusRequest{}); err != nil {
		t.Fatalf("the API after the refusals: %v", err)
	}
}

// Within the size bound, an issue request's lists are counted on the wire
// before decoding: 65,000 empty destinations fit in 128 KiB and are not
// turned into 65,000 objects.
func TestIssueWireCounts(t *testing.T) {
	ok, err := proto.Marshal(largestIssue(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIssueWire(ok); err != nil {
		t.Fatalf("the largest legitimate request: %v", err)
	}
	for name, r := range map[string]*brokerv1.IssueHandleRequest{
		"65 destinations": {Destinations: make([]*brokerv1.Destination, broker.MaxDestinations+1)},
		"65 pass intents": {PassIntents: make([]string, broker.MaxDestinations+1)},
		"17 methods":      {Destinations: []*brokerv1.Destination{{Methods: make([]string, broker.MaxMethods+1)}}},
		"9 budget lines":  {Budget: make([]*brokerv1.HandleBudgetLine, broker.MaxBudgetLines+1)},
		"33 regions":      {Residency: make([]string, broker.MaxResidency+1)},
	} {
		for i := range r.Destinations {
			if r.Destinations[i] == nil {
				r.Destinations[i] = &brokerv1.Destination{}
			}
		}
		for i := range r.Budget {
			r.Budget[i] = &brokerv1.HandleBudgetLine{}
		}
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkIssueWire(b); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// gatedStore holds every Put until released, counting how many run at once.
type gatedStore struct {
	*broker.MemoryStore
	gate          chan struct{}
	running, peak atomic.Int64
}

func (g *gatedStore) Put(ctx context.Context, k broker.HandleKey, gr *broker.Grant, max int) error {
	n := g.running.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	defer g.running.Add(-1)
	<-g.gate
	return g.MemoryStore.Put(ctx, k, gr, max)
}

// Many parallel calls over several connections: at most
// maxConcurrentCalls run at once, as many wait, and the rest are refused
// at once with ResourceExhausted. On the old code every call ran at once.
func TestAPIConcurrencyBound(t *testing.T) {
	f := newMemFixture(t)
	gs := &gatedStore{MemoryStore: f.store, gate: make(chan struct{})}
	b := broker.New(f.cfg, gs, nil, broker.Options{})
	dial := serveAPIOf(t, &Service{Broker: b})
	const conns, perConn = 8, 40
	const calls = conns * perConn
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var busy, ok, other atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		api := dial()
		for i := 0; i < perConn; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := api.IssueHandle(ctx, &brokerv1.IssueHandleRequest{PluginId: "p", InvocationId: "inv-" + string(rune('a'+c)) + string(rune('a'+i)),
					Intent: "example.read", Deadline: timestamppb.New(time.Now().Add(time.Minute)),
					Destinations: []*brokerv1.Destination{{Host: "api.example.com"}}})
				switch {
				case err == nil:
					ok.Add(1)
				case status.Code(err) == codes.ResourceExhausted:
					busy.Add(1)
				default:
					other.Add(1)
					t.Errorf("call: %v", err)
				}
			}()
		}
	}
	// Every call is running, refused, or (at most maxConcurrentCalls of
	// them) waiting.
	brokertest.WaitFor(t, "every call is placed", func() bool {
		return gs.running.Load()+busy.Load() >= calls-maxConcurrentCalls
	})
	close(gs.gate)
	wg.Wait()
	if p := gs.peak.Load(); p > maxConcurrentCalls {
		t.Fatalf("%d calls ran at once, bound %d", p, maxConcurrentCalls)
	}
	if ok.Load()+busy.Load() != calls || ok.Load() < maxConcurrentCalls {
		t.Fatalf("%d served, %d refused as busy, %d other, of %d", ok.Load(), busy.Load(), other.Load(), calls)
	}
	t.Logf("%d calls: at most %d at once, %d served, %d refused as busy", calls, gs.peak.Load(), ok.Load(), busy.Load())
}

// checkIssueWire counts exactly what the protobuf decoder would decode:
// a request it passes decodes within the bounds, and one it refuses
// decodes beyond them.
func FuzzIssueWire(f *testing.F) {
	for _, r := range []*brokerv1.IssueHandleRequest{
		largestIssue(time.Unix(0, 0)),
		{Destinations: make([]*brokerv1.Destination, 0), PassIntents: []string{"a", "b"}},
		{Destinations: []*brokerv1.Destination{{Host: "h", Methods: make([]string, broker.MaxMethods+1)}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkIssueWire(b)
		var r brokerv1.IssueHandleRequest
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		over := len(r.Destinations) > broker.MaxDestinations || len(r.PassIntents) > broker.MaxDestinations
		for _, d := range r.Destinations {
			over = over || len(d.Methods) > broker.MaxMethods
		}
		if over != (err != nil) {
			t.Fatalf("decoded %d destinations, %d pass intents; wire check: %v", len(r.Destinations), len(r.PassIntents), err)
		}
	})
}
