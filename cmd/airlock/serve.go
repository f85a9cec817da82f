package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/admin"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	path := configFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock serve [--config FILE]\n\nRuns the broker, the egress proxy, the token issuer and the admin listener (/healthz, /readyz, /metrics,\n"+
			tokens.JWKSPath+", POST /v1/secrets/refresh) until SIGINT or SIGTERM. SIGHUP refreshes secrets.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	goRun := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}

	vc, err := connectVault(ctx, cfg, log)
	if err != nil {
		return err
	}
	if vc != nil {
		goRun(vc.Run)
	}
	ring, err := newRing(ctx, cfg, vc, log)
	if err != nil {
		return err
	}
	goRun(func(ctx context.Context) { ring.Run(ctx, cfg.Tokens.Refresh) })

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_build_info", Help: "Build information.", ConstLabels: prometheus.Labels{"version": version},
	}, func() float64 { return 1 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_token_signing_keys", Help: "Signing keys that may verify now (active plus retired within retention).",
	}, func() float64 { return float64(len(ring.Keys())) }))

	b, runBroker, closeBroker, err := newBroker(cfg, vc, reg, log)
	if err != nil {
		return err
	}
	defer closeBroker()
	goRun(runBroker)

	adm := admin.New(reg, log)
	adm.Handle("GET "+tokens.JWKSPath, tokens.JWKSHandler(ring))
	adm.Handle("POST /v1/secrets/refresh", refreshHandler(b))
	adm.AddCheck("signing_key", func(context.Context) error {
		if ring.Active() == nil {
			return tokens.ErrNoActiveKey
		}
		return nil
	})
	adm.AddCheck("handle_store", b.Ping)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	goRun(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				b.RefreshSecrets()
			}
		}
	})

	api := &broker.Server{Broker: b, Tokens: newIssuer(cfg, ring), Ring: ring, StoreType: cfg.Broker.Store.Type,
		Version: version, Log: log}
	stopAPI, err := serveAPI(cfg.Broker.API, api, log)
	if err != nil {
		return err
	}
	defer stopAPI()

	px, err := proxy.New(cfg.Proxy, b, proxy.Options{Logger: log, Audit: log.With("log", "audit"), Registerer: reg})
	if err != nil {
		return err
	}
	pl, err := net.Listen("tcp", cfg.Proxy.Listen)
	if err != nil {
		return fmt.Errorf("proxy listener: %w", err)
	}
	proxyDone := make(chan error, 1)
	go func() { proxyDone <- px.Serve(ctx, pl) }()

	l, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		cancel()
		<-proxyDone
		return fmt.Errorf("admin listener: %w", err)
	}
	px.AddSelf(l.Addr())
	log.Info("airlock serving", "admin", l.Addr().String(), "jwks", "http://"+l.Addr().String()+tokens.JWKSPath,
		"key_source", cfg.Tokens.Keys.Source, "kid", ring.Active().ID,
		"handle_store", cfg.Broker.Store.Type, "intents", len(cfg.Broker.Intents), "broker_api", cfg.Broker.API.Socket,
		"egress_proxy", pl.Addr().String(), "echo_guard", *cfg.Proxy.EchoGuard)
	err = adm.Serve(ctx, l)
	cancel()
	if perr := <-proxyDone; err == nil && perr != nil && !errors.Is(perr, context.Canceled) {
		err = perr
	}
	log.Info("airlock stopped")
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// refreshHandler invalidates the secret cache, at most once a second so
// the endpoint cannot be used to hammer Vault.
func refreshHandler(b *broker.Broker) http.Handler {
	var mu sync.Mutex
	var last time.Time
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if time.Since(last) < time.Second {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":"rate_limited","detail":"secrets were refreshed less than a second ago"}`+"\n")
			return
		}
		last = time.Now()
		b.RefreshSecrets()
		_, _ = io.WriteString(w, `{"status":"refreshed"}`+"\n")
	})
}

// serveAPI serves the broker gRPC API on the unix socket (and TCP with
// mutual TLS when configured) and returns a function that stops it.
func serveAPI(c broker.APIConfig, api *broker.Server, log *slog.Logger) (func(), error) {
	var servers []*grpc.Server
	stop := func() {
		for _, g := range servers {
			done := make(chan struct{})
			go func() { g.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				g.Stop()
			}
		}
	}
	ul, err := broker.ListenUnix(c.Socket, c.AllowedUIDs, log)
	if err != nil {
		return nil, err
	}
	g := grpc.NewServer()
	api.Register(g)
	servers = append(servers, g)
	go func() { _ = g.Serve(ul) }()
	if c.TCP.Listen != "" {
		creds, err := broker.TCPCredentials(c.TCP)
		if err != nil {
			stop()
			return nil, err
		}
		tl, err := net.Listen("tcp", c.TCP.Listen)
		if err != nil {
			stop()
			return nil, fmt.Errorf("broker API TCP listener: %w", err)
		}
		tg := grpc.NewServer(grpc.Creds(creds))
		api.Register(tg)
		servers = append(servers, tg)
		go func() { _ = tg.Serve(tl) }()
		log.Info("broker API on TCP with mutual TLS", "listen", tl.Addr().String())
	}
	return stop, nil
}
