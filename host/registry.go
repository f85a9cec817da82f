package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/host/policy"
)

// State of a registered plugin.
type State string

// Plugin states.
const (
	StateStarting   State = "starting"
	StateRunning    State = "running"
	StateRestarting State = "restarting" // crashed or failed to start; relaunching after a backoff
	StateStopped    State = "stopped"    // an Executa plugin that exited cleanly: starts cold on the next call
	StateFailed     State = "failed"     // restart budget exhausted, or a failure a restart cannot fix
	StateShutdown   State = "shutdown"
)

// Status is what GET /v1/plugins shows of one plugin.
type Status struct {
	Name        string `json:"name"`
	Kind        Kind   `json:"kind"`
	State       State  `json:"state"`
	Protocol    string `json:"protocol_version,omitempty"`
	Pid         int    `json:"pid,omitempty"`
	Sandbox     string `json:"sandbox,omitempty"`
	Restarts    int    `json:"restarts"`
	LastFailure string `json:"last_failure,omitempty"`
	// LastStderr are the last lines the plugin's failed process wrote
	// to stderr, redacted as they were logged.
	LastStderr []string `json:"last_stderr,omitempty"`
	Health     string   `json:"health"` // ok | not_serving | unknown
	// Egress is whether the egress proxy serves a running plugin's proxy
	// listener: ok, or unavailable (serve is away; the plugin's requests
	// get 503 egress_unavailable); empty when not known (relayed).
	Egress  string    `json:"egress,omitempty"`
	Since   time.Time `json:"since"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Quarantined is set while a violation keeps the plugin from serving
	// calls (until an operator releases it).
	Quarantined *QuarantineStatus `json:"quarantined,omitempty"`
}

// QuarantineStatus says which invocation's violation quarantined a
// plugin, of which kinds, and when.
type QuarantineStatus struct {
	Invocation string    `json:"invocation"`
	Kinds      []string  `json:"kinds"`
	At         time.Time `json:"at"`
}

// Launcher starts one process of a plugin; the supervisor calls it for the
// first start and every restart.
type Launcher func(ctx context.Context) (Runtime, error)

// Host is the plugin registry: every plugin of either kind, its
// supervisor, and the one invoke path in front of them.
//
// # Concurrency
//
// Each plugin has one supervisor goroutine, started by Add and ended by
// Shutdown; it alone launches, restarts and retires that plugin's
// runtime. Invoke runs on the caller's goroutine and only reads the
// current runtime.
type Host struct {
	opts    Options
	ctx     context.Context // cancelled with ErrHostShutdown
	cancel  context.CancelCauseFunc
	metrics *pluginMetrics

	mu      sync.Mutex
	plugins map[string]*entry
	closing bool
	sup     sync.WaitGroup // supervisors
	grants  grantCalls
	// policy is opts.Policy until SetPolicy replaces it (a reload).
	policy atomic.Pointer[policy.Policy]
	// feed is told of every change of the plugins (Changed).
	feed changeFeed
}

// New returns an empty host; opts are what every plugin gets (broker,
// evidence, policy, proxy, restart policy, logging). Call Shutdown to stop
// it.
func New(opts Options) *Host {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Host{opts: opts, ctx: ctx, cancel: cancel, metrics: newPluginMetrics(opts.Registerer),
		plugins: map[string]*entry{}}
	h.policy.Store(opts.Policy)
	if opts.Registerer != nil && opts.Egress != nil {
		opts.Registerer.MustRegister(egressCollector{h})
	}
	return h
}

// Options returns the host's options with defaults filled.
func (h *Host) Options() Options { return h.opts }

// ErrNameTaken: another plugin already has the name on the control API.
var ErrNameTaken = errors.New("another plugin has this name")

// Add registers a plugin and starts its supervisor, which launches it at
// once. It returns when the first launch has succeeded or failed; a
// failure marks the plugin (restarting or failed, with its reason) and is
// returned for the caller to report, but the plugin stays registered and
// every other plugin keeps serving.
func (h *Host) Add(name string, kind Kind, launch Launcher) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return ErrHostShutdown
	}
	if _, ok := h.plugins[name]; ok {
		h.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNameTaken, name)
	}
	e := newEntry(name, kind, launch, h.opts.Restart)
	e.quarantine = h.loadQuarantine(name)
	e.feed = &h.feed
	h.plugins[name] = e
	h.feed.notify()
	// A series from the start: a plugin that never runs is down, not
	// absent (an absent series fires no alert).
	h.metrics.setUp(e, false)
	h.sup.Add(1)
	h.mu.Unlock()
	first := make(chan error, 1)
	go func() {
		defer h.sup.Done()
		h.supervise(e, first)
	}()
	return <-first
}

// Revive starts a plugin marked failed again, with its restart budget
// whole: a reinstall may have fixed what failed it. Like Add it returns
// the first launch's result. A plugin in any other state is left alone
// (its next launch picks up a reinstall), and nil is returned.
func (h *Host) Revive(name string) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return ErrHostShutdown
	}
	e := h.plugins[name]
	if e == nil {
		h.mu.Unlock()
		return ErrPluginUnknown
	}
	e.mu.Lock()
	if e.state != StateFailed {
		e.mu.Unlock()
		h.mu.Unlock()
		return nil
	}
	// The failed plugin's supervisor has returned (or is returning without
	// touching e again): this one takes over.
	e.backoff.Reset()
	e.setLocked(StateStarting)
	e.mu.Unlock()
	h.sup.Add(1)
	h.mu.Unlock()
	h.opts.Log.Info("restarting a failed plugin with its restart budget whole", "plugin", name, "kind", string(e.kind))
	first := make(chan error, 1)
	go func() {
		defer h.sup.Done()
		h.supervise(e, first)
	}()
	return <-first
}

// Status lists every plugin, by name.
func (h *Host) Status() []Status {
	h.mu.Lock()
	es := make([]*entry, 0, len(h.plugins))
	for _, e := range h.plugins {
		es = append(es, e)
	}
	h.mu.Unlock()
	out := make([]Status, 0, len(es))
	for _, e := range es {
		s := e.status()
		if h.opts.Egress != nil && s.State == StateRunning {
			if up, known := h.opts.Egress(s.Name); known {
				s.Egress = map[bool]string{true: "ok", false: "unavailable"}[up]
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names lists the plugins.
func (h *Host) Names() []string {
	var out []string
	for _, s := range h.Status() {
		out = append(out, s.Name)
	}
	return out
}

// Degraded names the plugins that are not serving, or whose egress is
// down (for /readyz).
func (h *Host) Degraded() []string {
	var out []string
	for _, s := range h.Status() {
		if s.State != StateRunning && s.State != StateStopped || s.Health == "not_serving" || s.Egress == "unavailable" ||
			s.Quarantined != nil {
			out = append(out, s.Name)
		}
	}
	return out
}

// Invoke runs one call through the invoke path. Refusals before anything
// reaches the plugin are errors: ErrPluginUnknown, ErrPluginRestarting
// (*RestartingError), ErrPluginFailed, ErrHostShutdown and those of
// Prepare and the policy. A plugin's own failure is a FAILED outcome.
func (h *Host) Invoke(ctx context.Context, name string, req InvokeRequest) (*Outcome, error) {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, ErrHostShutdown
	}
	e := h.plugins[name]
	if e == nil {
		h.mu.Unlock()
		return nil, ErrPluginUnknown
	}
	e.calls.Add(1)
	h.mu.Unlock()
	defer e.calls.Done()
	rt, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return invokePath{opts: h.invokeOptions(), host: h, base: h.ctx}.invoke(ctx, name, rt, req)
}

// Shutdown stops the host: new calls are refused, calls in flight are
// cancelled with the reason "host shutting down" (their handles revoked
// and outcomes recorded), then every plugin is shut down within its grace.
// It returns when every supervisor has ended or ctx is done.
func (h *Host) Shutdown(ctx context.Context) {
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
	h.cancel(ErrHostShutdown)
	waitCtx(ctx, &h.sup)
}

func waitCtx(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// pluginMetrics are the per-plugin series.
type pluginMetrics struct {
	up       *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	sandbox  *prometheus.GaugeVec
}

func newPluginMetrics(reg prometheus.Registerer) *pluginMetrics {
	m := &pluginMetrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "airlock_plugin_up",
			Help: "1 when the plugin is running and serving, else 0."}, []string{"plugin", "kind"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_plugin_restarts_total",
			Help: "Unplanned exits and failed probes that led to a restart."}, []string{"plugin", "kind"}),
		sandbox: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "airlock_plugin_sandbox",
			Help: "1 for the sandbox level the plugin's running process has (namespaces, landlock, off)."}, []string{"plugin", "level"}),
	}
	if reg != nil {
		reg.MustRegister(m.up, m.restarts, m.sandbox)
	}
	return m
}

// setSandbox records the level of e's process (rt nil: none runs).
func (m *pluginMetrics) setSandbox(e *entry, rt Runtime) {
	m.sandbox.DeletePartialMatch(prometheus.Labels{"plugin": e.name})
	if rt != nil {
		m.sandbox.WithLabelValues(e.name, rt.Sandbox()).Set(1)
	}
}

func (m *pluginMetrics) setUp(e *entry, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.up.WithLabelValues(e.name, string(e.kind)).Set(v)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// egressCollector exports airlock_plugin_egress_up for every running
// plugin whose egress is known, read at scrape time.
type egressCollector struct{ h *Host }

var egressDesc = prometheus.NewDesc("airlock_plugin_egress_up",
	"1 when the egress proxy serves the running plugin's proxy listener, 0 while serve is away (its requests get 503 egress_unavailable).",
	[]string{"plugin"}, nil)

func (c egressCollector) Describe(ch chan<- *prometheus.Desc) { ch <- egressDesc }

func (c egressCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.h.Status() {
		if s.Egress == "" {
			continue
		}
		v := 0.0
		if s.Egress == "ok" {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(egressDesc, prometheus.GaugeValue, v, s.Name)
	}
}
