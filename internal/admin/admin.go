// Package admin serves Airlock's admin listener: /healthz (the process is
// up), /readyz (every registered check passes), /metrics (Prometheus) and
// the token JWKS at /.well-known/jwks.json.
//
// # Security
//
// The listener binds to loopback by default. It serves no secret: the
// JWKS holds public keys only, and readiness failures name the check, not
// its error detail, to unauthenticated callers (a check's NotReady names
// what is not ready, such as plugin names, and nothing else).
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlock-dev/airlock/internal/serve"
)

// Check reports whether a dependency is ready.
type Check func(ctx context.Context) error

// NotReady is a check's failure that names what is not ready (the plugins
// not serving): /readyz lists Items under the check's name in
// "not_ready", so a probe or a person sees which one. Only names that are
// no secret belong in Items; any other error's text stays in the log.
type NotReady struct {
	What  string
	Items []string
}

func (e *NotReady) Error() string { return e.What + ": " + strings.Join(e.Items, ", ") }

// DefaultCheckTimeout is how long /readyz waits for one check: a
// dependency that has not answered by then (a stalled Vault or Redis)
// counts as not ready.
const DefaultCheckTimeout = time.Second

// Server is the admin HTTP server.
type Server struct {
	// CheckTimeout bounds each readiness check (DefaultCheckTimeout when
	// zero). Checks run in parallel, so /readyz answers within it.
	CheckTimeout time.Duration

	mux    *http.ServeMux
	log    *slog.Logger
	mu     sync.Mutex
	checks map[string]Check
}

// New returns a Server exposing reg's metrics.
func New(reg *prometheus.Registry, log *slog.Logger) *Server {
	s := &Server{mux: http.NewServeMux(), log: log, checks: map[string]Check{}}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.ready)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return s
}

// Handle adds a route (for example the JWKS, or an admin action).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// AddCheck registers a readiness check.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	checks := make(map[string]Check, len(s.checks))
	for n, c := range s.checks {
		checks[n] = c
	}
	s.mu.Unlock()
	sort.Strings(names)
	timeout := s.CheckTimeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	// Every check runs at once and is waited for until the timeout only:
	// one that ignores its context cannot hold the answer back.
	results := make(map[string]chan error, len(names))
	for _, n := range names {
		ch := make(chan error, 1)
		results[n] = ch
		go func() { ch <- checks[n](ctx) }()
	}
	failed := []string{}
	detail := map[string][]string{}
	for _, n := range names {
		var err error
		select {
		case err = <-results[n]:
		case <-ctx.Done():
			select {
			case err = <-results[n]:
			default:
				err = fmt.Errorf("no answer within %s: %w", timeout, ctx.Err())
			}
		}
		if err != nil {
			s.log.Warn("readiness check failed", "check", n, "err", err)
			failed = append(failed, n)
			if nr := (*NotReady)(nil); errors.As(err, &nr) {
				detail[n] = nr.Items
			}
		}
	}
	if len(failed) > 0 {
		body := map[string]any{"status": "not ready", "failed": failed}
		if len(detail) > 0 {
			body["not_ready"] = detail
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Serve serves on l until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return serve.HTTP(ctx, srv, l)
}

// Cached wraps a check so that it runs at most once per ttl; readiness
// probes every few seconds from several load balancers then cost one
// probe of the dependency per ttl.
func Cached(ttl time.Duration, c Check) Check {
	var mu sync.Mutex
	var last time.Time
	var lastErr error
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !last.IsZero() && time.Since(last) < ttl {
			return lastErr
		}
		lastErr, last = c(ctx), time.Now()
		return lastErr
	}
}
