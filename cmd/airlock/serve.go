package main

import (
	"context"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/tokens"
)

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	path := configFlag(fs)
	pprof := fs.Bool("pprof", false, "diagnostics: serve Go's profiling endpoints (/debug/pprof/) on the admin listener")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock serve [--config FILE]\n\nRuns the broker, the egress proxy, the token issuer, the broker API and the admin listener (/healthz, /readyz,\n/metrics, "+
			tokens.JWKSPath+", POST /v1/secrets/refresh) until SIGINT or SIGTERM.\nSIGHUP refreshes secrets and reloads the config file's intents and rates (a file that does not validate\nchanges nothing; other changed settings are logged as needing a restart).")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	hup, stop := hangups()
	defer stop()
	return daemon.Serve(ctx, cfg, daemon.Options{Log: newLogger(cfg.Log, stderr), Version: version, Reload: hup,
		Pprof: *pprof, AuditOut: auditOut(cfg.Log, stderr)})
}
