package host

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
)

// callRuntime is a Runtime whose actions run a test's function and
// remember each Call they were given.
type callRuntime struct {
	risk  policy.Risk
	input string
	run   func(ctx context.Context, c Call) *Outcome

	mu    sync.Mutex
	calls []Call
}

func (r *callRuntime) Kind() Kind       { return KindPluginV1 }
func (r *callRuntime) Protocol() string { return "1" }
func (r *callRuntime) Sandbox() string  { return "off" }
func (r *callRuntime) Pid() int         { return 0 }
func (r *callRuntime) Prepare(req InvokeRequest) (Action, error) {
	in := r.input
	if len(req.JSON) > 0 {
		in = string(req.JSON)
	}
	return &callAction{r: r, input: in}, nil
}
func (r *callRuntime) Health(context.Context) error   { return nil }
func (r *callRuntime) Exited() <-chan struct{}        { return make(chan struct{}) }
func (r *callRuntime) Fault() error                   { return nil }
func (r *callRuntime) Shutdown(context.Context) error { return nil }
func (r *callRuntime) Kill()                          {}
func (r *callRuntime) Release()                       {}

func (r *callRuntime) last() Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[len(r.calls)-1]
}

type callAction struct {
	r     *callRuntime
	input string
}

func (a *callAction) Risk() policy.Risk { return a.r.risk }
func (a *callAction) Facts() ActionFacts {
	return ActionFacts{SideEffect: "write", InputJSON: []byte(a.input)}
}
func (a *callAction) Run(ctx context.Context, c Call) *Outcome {
	a.r.mu.Lock()
	a.r.calls = append(a.r.calls, c)
	a.r.mu.Unlock()
	if a.r.run != nil {
		return a.r.run(ctx, c)
	}
	return &Outcome{Status: CallSucceeded}
}

// decisionFixture is a host with one callRuntime plugin ("p"), a policy,
// a memory ledger and an evidence log.
type decisionFixture struct {
	h      *Host
	rt     *callRuntime
	ledger *broker.MemoryStore
	evPath string
	opts   Options
}

func newDecisionFixture(t *testing.T, policyYAML string, cfg DecisionConfig, rt *callRuntime) *decisionFixture {
	t.Helper()
	pol, err := policy.Parse([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	evPath := filepath.Join(dir, "evidence.jsonl")
	ev, err := evidence.Open(evPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	if cfg.ApprovalPoll == 0 {
		cfg.ApprovalPoll = 10 * time.Millisecond
	}
	if cfg.WatchInterval == 0 {
		cfg.WatchInterval = 10 * time.Millisecond
	}
	store := broker.NewMemoryStore(1000, time.Hour, time.Hour, nil)
	opts := Options{Policy: pol, Evidence: ev, Ledger: store, Decision: cfg, QuarantineDir: filepath.Join(dir, "quarantine")}
	f := &decisionFixture{rt: rt, ledger: store, evPath: evPath, opts: opts}
	f.h = New(opts)
	if err := f.h.Add("p", KindPluginV1, func(context.Context) (Runtime, error) { return rt, nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.h.Shutdown(ctx)
	})
	return f
}

var (
	alice = Principal{ID: "alice", Method: "token"}
	bob   = Principal{ID: "bob", Method: "token"}
)

func (f *decisionFixture) invoke(ctx context.Context, caller Principal, input string, mutate ...func(*InvokeRequest)) (*Outcome, error) {
	req := InvokeRequest{Method: "numinance.ports.t.v1.S/M", JSON: json.RawMessage(input), Caller: caller,
		Actor: Actor{Kind: "principal", Principal: caller.ID}, Deadline: time.Now().Add(time.Minute)}
	for _, m := range mutate {
		m(&req)
	}
	return f.h.Invoke(ctx, "p", req)
}

// records are the evidence records of type typ, in order.
func (f *decisionFixture) records(t *testing.T, typ string) []evidence.Record {
	t.Helper()
	fh, err := os.Open(f.evPath)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []evidence.Record
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r evidence.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("evidence line: %v", err)
		}
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

func dataOf(t *testing.T, r evidence.Record) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *decisionFixture) grant(t *testing.T, g broker.AccessGrant) *broker.AccessGrant {
	t.Helper()
	if g.ID == "" {
		g.ID = broker.NewAccessGrantID()
	}
	if g.NotAfter.IsZero() {
		g.NotAfter = time.Now().Add(time.Hour)
	}
	g.IssuedAt, g.IssuedBy = time.Now(), "operator"
	if err := f.ledger.PutAccessGrant(context.Background(), &g); err != nil {
		t.Fatal(err)
	}
	return &g
}
