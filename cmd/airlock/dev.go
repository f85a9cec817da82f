package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/daemon"
)

// cmdDev runs the whole credential path in one process on embedded
// defaults (daemon.Dev).
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", stderr)
	path := configFlag(fs)
	exe, _ := os.Executable()
	provider := fs.String("provider", filepath.Join(filepath.Dir(exe), "tickets-provider"), "the sample provider binary (make run builds it)")
	executaBin := fs.String("executa", filepath.Join(filepath.Dir(exe), "executa-tickets"), "the sample Executa plugin binary (make run builds it)")
	control := fs.String("control", "", "control API listen address: unix:/path or host:port (default host.control: a unix socket under the state directory)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	hup, stop := hangups()
	defer stop()
	return daemon.Dev(ctx, cfg, daemon.DevOptions{Options: daemon.Options{Log: newLogger(cfg.Log, stderr), Version: version,
		Stdout: stdout, Reload: hup}, Provider: *provider, Executa: *executaBin, Control: *control, Invoke: invokeCommand(exe), ClientFlags: clientFlags(*path)})
}

func invokeCommand(exe string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			if !strings.Contains(rel, "/") {
				rel = "./" + rel // a shell looks a bare name up in PATH
			}
			return rel
		}
	}
	return exe
}

// clientFlags is what the banner's commands need to find this config.
func clientFlags(path string) string {
	if path == "" || path == os.Getenv("AIRLOCK_CONFIG") {
		return ""
	}
	return "--config " + path
}
