package host

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host/policy"
)

// stuckRuntime is a Runtime whose one action ignores its cancellation
// until released, and which records the deadline its Shutdown was given.
type stuckRuntime struct {
	running, release chan struct{}
	exited           chan struct{}

	mu               sync.Mutex
	shutdownDeadline time.Time
	shutdownCalled   bool
}

func (r *stuckRuntime) Kind() Kind       { return KindPluginV1 }
func (r *stuckRuntime) Protocol() string { return "1" }
func (r *stuckRuntime) Sandbox() string  { return "off" }
func (r *stuckRuntime) Pid() int         { return 0 }
func (r *stuckRuntime) Prepare(InvokeRequest) (Action, error) {
	return stuckAction{r}, nil
}
func (r *stuckRuntime) Health(context.Context) error { return nil }
func (r *stuckRuntime) Exited() <-chan struct{}      { return r.exited }
func (r *stuckRuntime) Fault() error                 { return nil }
func (r *stuckRuntime) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdownCalled = true
	r.shutdownDeadline, _ = ctx.Deadline()
	return nil
}
func (r *stuckRuntime) Kill()    {}
func (r *stuckRuntime) Release() {}

type stuckAction struct{ r *stuckRuntime }

func (stuckAction) Risk() policy.Risk { return policy.RiskRead }
func (a stuckAction) Run(context.Context, Call) *Outcome {
	close(a.r.running)
	<-a.r.release
	return &Outcome{Status: CallCancelled}
}

// A call that outlives its cancellation does not buy the plugin a second
// grace: the wait for calls in flight and the plugin's own shutdown share
// one ShutdownGrace, so the runtime's Shutdown gets the deadline that
// began when the host started shutting down.
func TestShutdownIsOneGrace(t *testing.T) {
	const grace = 100 * time.Millisecond
	h := New(Options{ShutdownGrace: grace, Policy: policy.AllowAll()})
	rt := &stuckRuntime{running: make(chan struct{}), release: make(chan struct{}), exited: make(chan struct{})}
	if err := h.Add("stuck", KindPluginV1, func(context.Context) (Runtime, error) { return rt, nil }); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = h.Invoke(context.Background(), "stuck", InvokeRequest{Method: "m", Deadline: time.Now().Add(time.Hour)})
	}()
	<-rt.running
	h.Shutdown(context.Background()) // the stuck call holds the whole grace
	ended := time.Now()
	close(rt.release)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.shutdownCalled {
		t.Fatal("the runtime was never shut down")
	}
	// The call used up the grace, so the deadline Shutdown got had
	// passed before the host's shutdown returned: no grace of its own.
	if rt.shutdownDeadline.IsZero() || rt.shutdownDeadline.After(ended) {
		t.Fatalf("Shutdown got deadline %v (host shutdown ended %v): a second grace", rt.shutdownDeadline, ended)
	}
}
