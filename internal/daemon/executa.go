package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/host/executa/aps"
	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/serve"
	"github.com/airlock-dev/airlock/tokens"
)

// secretReader reads an intent's secret, for the explicit raw-credential
// opt-in of Executa plugins that cannot use the proxy.
type secretReader = executa.Secrets

// executaServices are what the host offers Executa plugins: token
// verification, APS storage, files/*, the sampling backend.
type executaServices struct {
	opts    executa.Options
	closers []func()
}

// startExecutaServices opens what host.executa configures. Tokens are
// minted by the broker (a host process holds no signing key) and verified
// against deps.keys. Nothing is opened when no Executa plugin is
// configured.
func startExecutaServices(ctx context.Context, cfg *config.Config, deps hostDeps, log *slog.Logger) (_ *executaServices, err error) {
	xs := &executaServices{}
	defer func() {
		if err != nil {
			xs.close()
		}
	}()
	xc := cfg.Host.Executa
	if len(xc.Plugins) == 0 {
		return xs, nil
	}
	verifier, err := tokens.NewVerifier(deps.keys, tokens.VerifierOptions{Issuer: cfg.Tokens.Issuer, MaxLifetime: cfg.Tokens.TTL})
	if err != nil {
		return nil, err
	}
	kv, err := aps.Open(xc.Storage)
	if err != nil {
		return nil, fmt.Errorf("host.executa.storage: %w", err)
	}
	xs.closers = append(xs.closers, func() { kv.Close() })
	if xc.StorageQuota > 0 {
		kv.Quota = xc.StorageQuota
	}
	xs.opts = executa.Options{Broker: deps.broker, Tokens: deps.tokens, Secrets: deps.secrets, Verifier: verifier,
		EgressProxy: deps.egressProxy, KV: kv, Log: log, SamplingTimeout: xc.Sampling.Timeout, Timeouts: xc.Timeouts}
	switch s := xc.Sampling; {
	case s.Fixture != "":
		b, err := sampling.LoadFixture(s.Fixture)
		if err != nil {
			return nil, fmt.Errorf("host.executa.sampling.fixture: %w", err)
		}
		xs.opts.Sampling = b
	case s.OpenAI != nil:
		ob := &sampling.OpenAI{BaseURL: s.OpenAI.BaseURL, Model: s.OpenAI.Model, Intent: s.OpenAI.Intent,
			JSON: s.OpenAI.JSON, Broker: deps.broker, EgressProxy: deps.egressProxy, Log: log}
		xs.opts.Sampling = ob
		xs.closers = append(xs.closers, ob.CloseIdleConnections)
	}
	if xc.FilesListen != "" {
		l, err := net.Listen("tcp", xc.FilesListen)
		if err != nil {
			return nil, fmt.Errorf("host.executa.files_listen: %w", err)
		}
		files := &aps.Files{KV: kv, Dir: xc.FilesDir, BaseURL: "http://" + l.Addr().String()}
		xs.opts.Files = files
		srv := &http.Server{Handler: files.Handler(), ReadHeaderTimeout: 5 * time.Second}
		// The upload server runs until close (after the plugins are down),
		// the collection of abandoned uploads until ctx ends or close;
		// close returns once both have, before the store closes, and
		// uploads in flight finish first (up to serve.ShutdownGrace).
		serving, stopServing := context.WithCancel(context.Background())
		gcCtx, stopGC := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := serve.HTTP(serving, srv, l); err != nil {
				log.Error("executa files listener", "err", err)
			}
			_ = srv.Close() // what outlived the grace
		})
		wg.Go(func() { files.Run(gcCtx, aps.DefaultUploadGC/4) })
		xs.closers = append(xs.closers, func() { stopServing(); stopGC(); wg.Wait() })
	}
	return xs, nil
}

func (xs *executaServices) close() {
	for i := len(xs.closers) - 1; i >= 0; i-- {
		xs.closers[i]()
	}
	xs.closers = nil
}
