package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/internal/config"
)

// hostOptions is the one translation of the config into host.Options,
// shared by Host, Dev and Install, so that a plugin is launched the same
// way whoever launches it: its environment, sandbox, stderr level and
// redaction, restart and health settings. The caller adds what exists
// only at run time: the broker, evidence, policy, metrics, a proxy
// handoff, and the egress proxy when it is not the configured one.
func hostOptions(cfg *config.Config, log *slog.Logger) (host.Options, error) {
	level, _ := config.ParseLevel(cfg.Host.StderrLevel) // validated with the config
	o := host.Options{EgressProxy: cfg.Broker.EgressProxy, InterceptCAFile: cfg.Proxy.Intercept.CAFile,
		HTTPSProxyOptOut: cfg.Host.HTTPSProxyOptOut, Ports: Ports(),
		ShutdownGrace: cfg.Host.ShutdownGrace, Restart: cfg.Host.Restart, HealthInterval: cfg.Host.HealthInterval,
		StderrLevel: level, Redactor: cfg.Host.Redactor(), Log: log,
		Sandbox: cfg.Host.Sandbox, Hide: cfg.Hidden(), Decision: cfg.Host.Decision.Options(),
		QuarantineDir: filepath.Join(cfg.StateDir, "quarantine")}
	// Installed ports are served as their digests are still the pinned
	// ones; one that is not is refused, and the others are served.
	refused, err := pluginv1.LoadPorts(o.Ports, cfg.Host.Lockfile)
	if err != nil {
		return host.Options{}, err
	}
	for _, err := range refused {
		log.Error("installed port refused; the host serves the others", "reason", err.Error())
	}
	if dir := cfg.Host.Artifacts; dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return host.Options{}, fmt.Errorf("host.artifacts: %s is not a directory", dir)
		}
		o.Artifacts = host.DirArtifacts{Dir: dir}
	}
	return o, nil
}

// ledgerOf is the ledger behind a broker API: the embedded broker's store,
// or airlock serve's over the broker API.
func ledgerOf(api broker.API) broker.Ledger {
	switch b := api.(type) {
	case interface{ Ledger() broker.Ledger }:
		return b.Ledger()
	case broker.Ledger:
		return b
	}
	return nil
}
