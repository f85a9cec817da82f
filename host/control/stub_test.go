package control_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
)

// stub is a Runtime with no process: what the control API is tested
// against, so its tests need no plugin protocol (the runtimes' own tests
// drive the control API with real plugins).
type stub struct {
	exited chan struct{}
	rec    *recorder // nil: requests are not kept
}

func newStub() *stub { return &stub{exited: make(chan struct{})} }

func (s *stub) Kind() host.Kind                { return host.KindExecuta }
func (s *stub) Protocol() string               { return "2.0" }
func (s *stub) Sandbox() string                { return "off" }
func (s *stub) Pid() int                       { return 0 }
func (s *stub) Health(context.Context) error   { return nil }
func (s *stub) Exited() <-chan struct{}        { return s.exited }
func (s *stub) Fault() error                   { return nil }
func (s *stub) Shutdown(context.Context) error { return nil }
func (s *stub) Kill()                          {}
func (s *stub) Release()                       {}
func (s *stub) Prepare(req host.InvokeRequest) (host.Action, error) {
	if s.rec != nil {
		s.rec.mu.Lock()
		s.rec.reqs = append(s.rec.reqs, req)
		s.rec.mu.Unlock()
	}
	return stubAction{}, nil
}

type stubAction struct{}

func (stubAction) Risk() policy.Risk { return policy.RiskRead }

func (stubAction) Run(_ context.Context, call host.Call) *host.Outcome {
	return &host.Outcome{InvocationID: call.ID, Status: host.CallSucceeded, Data: json.RawMessage(`{"ok":true}`)}
}

// runs is a stub whose calls, at read risk, run fn: a plugin that
// behaves in time as a test needs.
type runs struct {
	stub
	fn func(ctx context.Context, call host.Call) *host.Outcome
}

func newRuns(fn func(ctx context.Context, call host.Call) *host.Outcome) *runs {
	return &runs{stub: *newStub(), fn: fn}
}

func (r *runs) Prepare(host.InvokeRequest) (host.Action, error) { return runsAction{r.fn}, nil }

type runsAction struct {
	fn func(ctx context.Context, call host.Call) *host.Outcome
}

func (runsAction) Risk() policy.Risk { return policy.RiskRead }

func (a runsAction) Run(ctx context.Context, call host.Call) *host.Outcome { return a.fn(ctx, call) }

// bigResult answers a call with a result of n bytes.
func bigResult(call host.Call, n int) *host.Outcome {
	return &host.Outcome{InvocationID: call.ID, Status: host.CallSucceeded,
		Data: json.RawMessage(`{"blob":"` + strings.Repeat("x", n) + `"}`)}
}

// addStub registers a stub plugin named name with h.
func addStub(h *host.Host, name string) error {
	return h.Add(name, host.KindExecuta, func(context.Context) (host.Runtime, error) { return newStub(), nil })
}

// asOperator serves next as Authenticate would for one principal,
// "operator" (tests of routes, not of authentication).
func asOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(control.WithCaller(r.Context(), host.Principal{ID: "operator", Method: control.MethodToken})))
	})
}

// recorder keeps the requests that reached a stub: what the host was
// asked, after the control API.
type recorder struct {
	mu   sync.Mutex
	reqs []host.InvokeRequest
}

func (r *recorder) last() host.InvokeRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		return host.InvokeRequest{}
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// addRecordingStub registers a stub plugin that keeps what reaches it.
func addRecordingStub(h *host.Host, name string) (*recorder, error) {
	rec := &recorder{}
	return rec, h.Add(name, host.KindExecuta, func(context.Context) (host.Runtime, error) {
		s := newStub()
		s.rec = rec
		return s, nil
	})
}
