package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/airlock-dev/airlock/internal/admin"
	"github.com/airlock-dev/airlock/tokens"
)

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	path := configFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock serve [--config FILE]\n\nRuns the admin listener (/healthz, /readyz, /metrics, "+tokens.JWKSPath+") and the token issuer\nuntil SIGINT or SIGTERM.")
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

	ring, err := newRing(ctx, cfg, log)
	if err != nil {
		return err
	}
	go ring.Run(ctx, cfg.Tokens.Refresh)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_build_info", Help: "Build information.", ConstLabels: prometheus.Labels{"version": version},
	}, func() float64 { return 1 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_token_signing_keys", Help: "Signing keys that may verify now (active plus retired within retention).",
	}, func() float64 { return float64(len(ring.Keys())) }))

	adm := admin.New(reg, log)
	adm.Handle("GET "+tokens.JWKSPath, tokens.JWKSHandler(ring))
	adm.AddCheck("signing_key", func(context.Context) error {
		if ring.Active() == nil {
			return tokens.ErrNoActiveKey
		}
		return nil
	})

	l, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	log.Info("airlock serving", "admin", l.Addr().String(), "jwks", "http://"+l.Addr().String()+tokens.JWKSPath,
		"key_source", cfg.Tokens.Keys.Source, "kid", ring.Active().ID)
	err = adm.Serve(ctx, l)
	log.Info("airlock stopped")
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
