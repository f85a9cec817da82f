package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/health"
	"github.com/airlock-dev/airlock/internal/serve"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// Broker is what the proxy needs from the broker.
type Broker interface {
	Resolve(ctx context.Context, handle string) (*broker.Grant, error)
	Intent(name string) (broker.Intent, bool)
	Secret(ctx context.Context, g *broker.Grant, fresh bool) (broker.Secret, error)
}

var _ Broker = (*broker.Broker)(nil)

// Options configure a Server beyond its Config.
type Options struct {
	// Resolver for upstream names; net.DefaultResolver when nil.
	Resolver Resolver
	// Logger for operational messages; Audit receives one line per request.
	Logger *slog.Logger
	Audit  *slog.Logger
	// AuditSink, when set, takes the audit lines instead of Audit: built
	// without reflection and written off the request path (the daemon
	// gives an *auditlog.Writer). While it reports Saturated the proxy
	// refuses requests with 503 audit_unavailable.
	AuditSink AuditSink
	// Registerer for metrics; none when nil.
	Registerer prometheus.Registerer
	// GlobalLimits enforces the rates across replicas when
	// limits.scope is global (the Redis handle store).
	GlobalLimits GlobalLimiter
	// Vault holds the intercept CA when proxy.intercept.vault is set.
	Vault *vaultapi.Client
	// Ledger is where the egress of handles with budget lines is
	// charged, access grants are checked and violations recorded; nil:
	// the broker's handle store when it keeps the ledger (enforce.go).
	Ledger broker.Ledger
	// Tracing, when set, makes a span of each request (trace.go).
	Tracing *tracing.Tracing
}

// Server is the egress proxy.
type Server struct {
	cfg     Config
	broker  Broker
	up      *upstreamClient
	dialer  *dialer
	policy  *addressPolicy
	limits  atomic.Pointer[limiter] // replaced by SetLimits
	log     *slog.Logger
	audit   *slog.Logger
	sink    AuditSink
	metrics *metrics
	echo    bool
	ca      atomic.Pointer[interceptCA] // nil: CONNECT is refused
	caStore caStore
	// caReload: whether the last reread of the CA succeeded.
	caReload health.Reload
	tokens   tokenCache // the OAuth2 processors' access tokens
	// h2 sends the requests that came as HTTP/2 (h2pool.go).
	h2 *h2Pools
	// ws opens upstream WebSockets (HTTP/1.1 only, never pooled).
	ws *http.Transport
	// ledger and revoker enforce the decision point's limits (enforce.go);
	// either may be nil.
	ledger  broker.Ledger
	revoker invocationRevoker
	// tracer is nil when tracing is off (trace.go).
	tracer trace.Tracer
}

// New builds a proxy. Zero fields of cfg take their defaults
// (WithDefaults), so proxy.New(proxy.Config{}, b, proxy.Options{}) serves
// on the default limits; cfg is then validated and the first problem
// returned.
func New(cfg Config, b Broker, opts Options) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("proxy: a broker is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Audit == nil {
		opts.Audit = slog.New(slog.DiscardHandler)
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	policy := &addressPolicy{}
	for _, s := range cfg.AllowCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, errors.New("proxy.allow_cidrs: not a CIDR prefix")
		}
		policy.allow = append(policy.allow, p.Masked())
	}
	resolver := opts.Resolver
	if len(cfg.Resolve) > 0 {
		pins := map[string][]netip.Addr{}
		for host, addrs := range cfg.Resolve {
			for _, a := range addrs {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					return nil, errors.New("proxy.resolve: not an IP address")
				}
				h := strings.ToLower(strings.TrimSuffix(host, "."))
				pins[h] = append(pins[h], ip)
			}
		}
		resolver = &pinnedResolver{pins: pins, next: resolver}
	}
	d := &dialer{resolver: resolver, policy: policy, timeout: cfg.Upstream.DialTimeout}
	tlsConfig, err := newTLSConfig(cfg)
	if err != nil {
		return nil, err
	}
	up := newUpstreamClient(cfg, d, tlsConfig)
	lim := newLimiter(cfg.Limits)
	if cfg.Limits.Scope == LimitsGlobal {
		if opts.GlobalLimits == nil {
			return nil, errors.New("proxy.limits.scope global needs the Redis handle store (broker.store.type redis)")
		}
		lim.global = opts.GlobalLimits
	}
	s := &Server{cfg: cfg, broker: b, up: up, h2: newH2Pools(cfg, d, tlsConfig), ws: newWebSocketTransport(cfg, d, tlsConfig), dialer: d, policy: policy,
		log: opts.Logger, audit: opts.Audit, sink: opts.AuditSink, metrics: newMetrics(opts.Registerer), echo: *cfg.EchoGuard,
		ledger: ledgerOf(opts.Ledger, b)}
	s.revoker, _ = b.(invocationRevoker)
	if opts.Tracing != nil {
		s.tracer = opts.Tracing.Tracer("github.com/airlock-dev/airlock/proxy")
	}
	s.limits.Store(lim)
	if cfg.Intercept.CAFile != "" {
		if s.caStore, err = newCAStore(cfg.Intercept, opts.Vault); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ca, err := openCA(ctx, s.caStore, cfg.Intercept.PermittedDomains)
		cancel()
		switch {
		case err == nil:
			s.ca.Store(ca)
		case cfg.Intercept.Vault.Path != "":
			// Vault down at start is an outage, not a bad config: CONNECT
			// is refused until the reload loop loads the CA (Serve).
			opts.Logger.Warn("proxy: the intercept CA cannot be read from Vault; CONNECT is refused until it loads (retried every proxy.intercept.reload)",
				"error", err.Error())
		default:
			return nil, err
		}
	}
	return s, nil
}

// AddSelf records an address the proxy (or its admin listener) listens
// on, so that it is never dialled as an upstream.
func (s *Server) AddSelf(addr net.Addr) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return
	}
	s.policy.addSelf(ap)
}

// ServeHTTP opens CONNECT tunnels or refuses them, serves WebSocket
// handshakes, refuses other protocol upgrades, and forwards the rest.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.sink != nil && s.sink.Saturated() {
		s.refuseUnaudited(w, r)
		return
	}
	if r.Method == http.MethodConnect && s.ca.Load() != nil {
		s.connect(w, r)
		return
	}
	if r.Method == http.MethodConnect {
		s.refuseEarly(w, r, deny(CodeConnectNotAllowed, "CONNECT is not enabled (proxy.intercept): send http://… requests through the proxy; it adds TLS"))
		return
	}
	if httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") {
		if isWebSocketUpgrade(r) {
			s.serveWebSocket(w, r) // message by message (websocket.go)
			return
		}
		// Any other protocol switch would leave a byte stream the
		// proxy cannot hold to its checks or the echo guard; it is
		// refused before any handle is looked at.
		s.refuseEarly(w, r, deny(CodeUpgradeNotSupported, "protocol upgrades other than WebSocket are not supported through the proxy"))
		return
	}
	s.forward(w, r)
}

// refuseEarly answers r with d before any handle is looked at, and
// audits it.
func (s *Server) refuseEarly(w http.ResponseWriter, r *http.Request, d *denial) {
	s.answer(w, r, &auditRecord{start: time.Now(), Plugin: connPlugin(r.Context()), Method: r.Method, Host: r.Host, Mode: requestMode(r)}, d)
}

// answer finishes a's record with d and writes d as the response.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, a *auditRecord, d *denial) {
	s.traceStart(r, a)
	s.finish(a, d)
	d.write(w, r)
}

// Serve serves on l until ctx ends, then shuts down gracefully: idle
// connections close at once, requests in flight get serve.ShutdownGrace.
//
// Its background work (the limiter and idle-connection sweeps, the
// intercept CA reload) ends before Serve returns, whether ctx ended or
// the listener failed.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.AddSelf(l.Addr())
	loop := s.loop("")
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		serve.Every(bg, time.Minute, func(now time.Time) {
			s.limits.Load().sweep(now.Add(-10 * time.Minute))
			s.up.idle.sweep(now.Add(-s.cfg.Upstream.IdleConnTimeout))
		})
	})
	if s.caStore != nil {
		wg.Go(func() { serve.Every(bg, s.cfg.Intercept.Reload, func(time.Time) { s.reloadCA(bg) }) })
	}
	err := loop.Serve(ctx, l)
	s.up.CloseIdleConnections()
	s.h2.closeIdle()
	s.ws.CloseIdleConnections()
	return err
}

// finish records the end of a request: audit line and metrics.
func (s *Server) finish(a *auditRecord, d *denial) {
	now := time.Now()
	a.total = now.Sub(a.start)
	if d != nil {
		a.Code, a.Reason = d.code, d.auditReason()
		if a.Status == 0 {
			a.Status = codeStatus[d.code]
		}
	}
	if s.tracer != nil {
		s.endSpans(a, now)
	}
	if s.sink != nil {
		a.writeLine(s.sink, now)
	} else {
		a.log(s.audit)
	}
	s.metrics.done(a)
	if d != nil && a.grant != nil {
		if kind, ok := violationKinds[d.code]; ok {
			s.violation(a.grant, kind, a.presentedBy)
		}
	}
}

// attribute resolves a handle to its live grant and intent, and names
// them in the audit record.
func (s *Server) attribute(ctx context.Context, handle string, a *auditRecord) (*broker.Grant, broker.Intent, *denial) {
	g, err := s.broker.Resolve(ctx, handle)
	conn := connPlugin(ctx)
	if g != nil {
		// Another plugin's credential is refused whatever its state: the
		// line names the plugin that sent it (tenant.go).
		if d := s.foreignCredential(conn, g, a); d != nil {
			a.grant, a.presentedBy = g, conn
			return nil, broker.Intent{}, d
		}
		a.Plugin, a.Invocation, a.Intent, a.HandleFP = g.PluginID, g.InvocationID, g.Intent, g.Fingerprint
	} else {
		a.Plugin, a.HandleFP = conn, broker.Fingerprint(handle)
	}
	switch {
	case errors.Is(err, broker.ErrStoreUnavailable):
		return nil, broker.Intent{}, deny(CodeStoreUnavailable, "the handle store is unavailable; try again").withReason(err.Error())
	case err != nil:
		// Unknown, expired and revoked look the same to the plugin.
		return nil, broker.Intent{}, deny(CodeHandleInvalid, "the credential handle is not valid").withReason(err.Error())
	}
	a.grant = g
	if g.Pass {
		return g, broker.Intent{}, nil // the caller decides: only a CONNECT takes a pass
	}
	in, ok := s.broker.Intent(g.Intent)
	if !ok {
		return nil, broker.Intent{}, deny(CodeHandleInvalid, "the credential handle is not valid").withReason("intent no longer configured")
	}
	return g, in, nil
}

func (s *Server) prepare(r *http.Request, a *auditRecord) (*exchange, *denial) {
	s.traceStart(r, a)
	handle, ok := extractHandle(r)
	if !ok {
		return nil, deny(CodeHandleMissing, "no credential handle: send it as Proxy-Authorization (Bearer, or Basic with the handle as user name)")
	}
	g, in, d := s.attribute(r.Context(), handle, a)
	if d != nil {
		return nil, d
	}
	if g.Pass {
		return nil, deny(CodePassNotAHandle, "the plugin pass in HTTPS_PROXY only opens CONNECT tunnels; send this request's own credential handle")
	}
	// The kind's injector is resolved with the intent, once: a kind
	// this proxy cannot apply is refused before anything else is done.
	inj, pol, d := injectorFor(in)
	if d != nil {
		return nil, d
	}
	t, d := parseTarget(r)
	if d != nil {
		return nil, d
	}
	a.Host, a.Port = t.host, t.port
	if d := checkDestination(g, in, r.Method, t); d != nil {
		return nil, d
	}
	if d := checkResidency(g, in, t); d != nil {
		return nil, d
	}
	if d := s.checkAccessGrant(r.Context(), g, a.start); d != nil {
		return nil, d
	}
	sl, d := s.limits.Load().admit(r.Context(), g, a.start)
	if d != nil {
		return nil, d
	}
	x := &exchange{s: s, grant: g, intent: in, inj: inj, pol: pol, handle: handle, audit: a, slot: sl}
	if max := s.cfg.Limits.MaxRequestBody; r.ContentLength > max {
		return x, deny(CodeBodyTooLarge, "the request body is larger than the proxy allows")
	} else if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(nil, r.Body, max)
	}
	// A small body of an idempotent request is kept so the request can be
	// replayed once with a rotated secret.
	// A token processor's request is replayed once after a 401 with a
	// fresh token, whatever its method: a 401 means it was not accepted.
	tokenRetry := pol.tokenRetry
	if (idempotent(r.Method) || tokenRetry) && r.ContentLength >= 0 && r.ContentLength <= MaxReplayBody {
		if r.ContentLength > 0 {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return x, bodyDenial(err)
			}
			x.replay = b
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		}
		x.canRetry, x.tokenRetry = idempotent(r.Method), tokenRetry
	}
	ts := a.tr.now()
	sec, err := s.broker.Secret(a.tr.under(r.Context()), g, false)
	a.tr.done(spanSecret, ts, err)
	if err != nil {
		return x, secretDenial(err)
	}
	a.Lease = sec.Lease
	stripHopByHop(r.Header)
	if x.canRetry && len(pol.restore) > 0 {
		x.placeholders = http.Header{}
		for _, name := range pol.restore {
			if v := r.Header.Values(name); len(v) > 0 {
				x.placeholders[http.CanonicalHeaderKey(name)] = append([]string(nil), v...)
			}
		}
	}
	forms, d := inj.inject(r, in.Inject.Kind, sec, handle)
	if d != nil {
		return x, d
	}
	x.secret, x.forms = sec, forms
	a.Version = sec.Version
	r.URL.Scheme = "https"
	r.URL.Host = upstreamAuthority(t.host, t.port, r.URL.Host)
	r.Host = r.URL.Host
	// The path goes upstream byte for byte as the client sent it.
	r.URL.Opaque = t.raw
	if s.echo {
		// Ask for identity so the guard can scan the body; a response
		// compressed anyway is refused in exchange.RoundTrip.
		r.Header.Del("Accept-Encoding")
	}
	if pol.processor {
		a.Processor = in.Inject.Name()
		if d := inj.process(r, x); d != nil {
			return x, d
		}
	}
	if where := handleLeft(r, t.host); where != "" {
		return x, handleLeftDenial(where)
	}
	if d := x.scanBody(r); d != nil {
		return x, d
	}
	if len(g.Budget) > 0 {
		// Charged last, once nothing else refuses it; the body's bytes
		// are counted as they go upstream.
		if d := s.chargeRequest(r.Context(), g); d != nil {
			return x, d
		}
		if x.replay != nil {
			x.bodyBytes.Store(int64(len(x.replay)))
		} else if r.Body != nil && r.Body != http.NoBody {
			r.Body = &countedBody{rc: r.Body, n: &x.bodyBytes}
		}
	}
	return x, nil
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
