package main

import (
	"context"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/internal/daemon"
)

func cmdHost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "install" {
		return cmdHostInstall(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("host", stderr)
	path := configFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: airlock host [--config FILE]          run the installed plugins
       airlock host install [--config FILE] DIR   install the package in DIR (provider + manifest.yaml)

Runs the installed plugin/v1 providers and the host.executa plugins beside airlock serve,
the control API (host.control) and the host admin listener (host.admin: /readyz, /metrics).
A plugin that fails is marked failed (airlock plugins shows why); the others keep serving.
SIGINT or SIGTERM stops it; SIGHUP reloads host.policy (other changed settings are logged
as needing a restart).`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	// SIGHUP reloads the policy; left to its default it would end the
	// host without a shutdown (no last checkpoint, plugins orphaned).
	hup, stop := hangups()
	defer stop()
	return daemon.Host(ctx, cfg, daemon.Options{Log: newLogger(cfg.Log, stderr), Version: version, Reload: hup})
}

func cmdHostInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("host install", stderr)
	path := configFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: airlock host install [--config FILE] DIR   (DIR holds provider and manifest.yaml)")
		return errUsage
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	res, remote, err := daemon.Install(ctx, cfg, fs.Arg(0), daemon.Options{Log: newLogger(cfg.Log, stderr)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "installed %s: protocol v%d, binary sha256 %s, manifest sha256 %s\n",
		res.Name, res.ProtocolVersion, res.BinarySHA256[:16], res.ManifestSHA256[:16])
	if err == nil && remote {
		_, err = fmt.Fprintf(stdout, "through the running airlock host: %s is %s%s\n", res.Name, res.State, orEmpty(" (", res.LastFailure, ")"))
	}
	return err
}

func orEmpty(pre, s, post string) string {
	if s == "" {
		return ""
	}
	return pre + s + post
}
