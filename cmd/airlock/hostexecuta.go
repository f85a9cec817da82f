package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/tokens"
)

// startExecuta starts the configured Executa plugins under supervision and
// registers them with h. Tokens are minted by the broker (this process
// holds no signing key) and verified against airlock serve's JWKS. The
// returned func releases the storage and the files listener; call it
// after h.Shutdown.
func startExecuta(ctx context.Context, cfg *config.Config, bc *broker.Client, h *host.Host, log *slog.Logger) (func(), error) {
	xc := cfg.Host.Executa
	if len(xc.Plugins) == 0 {
		return func() {}, nil
	}
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (func(), error) { cleanup(); return nil, err }

	verifier, err := tokens.NewVerifier(&tokens.JWKSClient{URL: xc.JWKS, HTTPClient: &http.Client{Timeout: 10 * time.Second}},
		tokens.VerifierOptions{Issuer: cfg.Tokens.Issuer})
	if err != nil {
		return fail(err)
	}
	kv, err := executa.OpenKVStore(xc.Storage)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { kv.Close() })
	if xc.StorageQuota > 0 {
		kv.Quota = xc.StorageQuota
	}
	opts := executa.Options{Broker: bc, Tokens: bc, Verifier: verifier, EgressProxy: cfg.Broker.EgressProxy, KV: kv, Log: log}
	switch s := xc.Sampling; {
	case s.Fixture != "":
		b, err := executa.LoadFixtureBackend(s.Fixture)
		if err != nil {
			return fail(fmt.Errorf("host.executa.sampling.fixture: %w", err))
		}
		opts.Sampling = b
	case s.OpenAI != nil:
		opts.Sampling = &executa.OpenAIBackend{BaseURL: s.OpenAI.BaseURL, Model: s.OpenAI.Model, Intent: s.OpenAI.Intent,
			JSON: s.OpenAI.JSON, Broker: bc, EgressProxy: cfg.Broker.EgressProxy}
	}
	if xc.FilesListen != "" {
		l, err := net.Listen("tcp", xc.FilesListen)
		if err != nil {
			return fail(fmt.Errorf("host.executa.files_listen: %w", err))
		}
		opts.Files = &executa.Files{KV: kv, Dir: xc.FilesDir, BaseURL: "http://" + l.Addr().String()}
		srv := &http.Server{Handler: opts.Files.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("executa files listener", "err", err)
			}
		}()
		closers = append(closers, func() { _ = srv.Close() })
		// Uploads begun and never completed are collected.
		go opts.Files.Run(ctx, executa.DefaultUploadGC/4)
	}
	for _, pc := range xc.Plugins {
		sup := executa.NewSupervisor(executa.PluginConfig{Name: pc.Name, Command: pc.Command, Args: pc.Args,
			Strict: pc.Strict, EnvDeny: pc.EnvDeny, Onefile: pc.Onefile, Credentials: pc.Credentials}, opts)
		if err := h.AddExecuta(pc.Name, sup); err != nil {
			return fail(fmt.Errorf("executa plugin: %w", err))
		}
		// Start now, so a plugin that cannot start fails airlock host.
		if _, err := sup.Process(ctx); err != nil {
			return fail(fmt.Errorf("executa plugin %s: %w", pc.Name, err))
		}
	}
	return cleanup, nil
}
