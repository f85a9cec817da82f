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
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/serve"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// hostPorts are the port files compiled into this host: they, not a
// provider's copies, govern every call.
func hostPorts() map[string]protoreflect.FileDescriptor {
	return map[string]protoreflect.FileDescriptor{
		"numinance.ports.tickets.v1": ticketsv1.File_numinance_ports_tickets_v1_tickets_proto,
	}
}

func cmdHost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "install" {
		return cmdHostInstall(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("host", stderr)
	path := configFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock host [--config FILE]          run the installed plugins\n       airlock host install [--config FILE] DIR   install the package in DIR (provider + manifest.yaml)")
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

	bc, err := broker.Dial("unix://"+strings.TrimPrefix(cfg.Host.Broker, "unix:"), nil)
	if err != nil {
		return err
	}
	defer bc.Close()
	if _, err := bc.Status(ctx); err != nil {
		return fmt.Errorf("broker at %s: %w (is airlock serve running?)", cfg.Host.Broker, err)
	}
	opts, closeEvidence, err := hostOptions(cfg, bc, log)
	if err != nil {
		return err
	}
	defer closeEvidence()
	lf, err := host.ReadLockfile(cfg.Host.Lockfile)
	if err != nil {
		return err
	}
	if len(lf.Plugins) == 0 && len(cfg.Host.Executa.Plugins) == 0 {
		log.Warn("no plugins installed; use airlock host install DIR")
	}
	h := host.NewHost()
	defer h.Shutdown(context.Background())
	for name, e := range lf.Plugins {
		inst, err := e.Load(name)
		if err != nil {
			return err
		}
		if err := h.Supervise(ctx, inst, opts); err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
	}
	closeExecuta, err := startExecuta(ctx, cfg, bc, h, log)
	if err != nil {
		return err
	}
	defer func() { h.Shutdown(context.Background()); closeExecuta() }()
	l, err := listenControl(cfg.Host.Control)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h.ControlHandler(), ReadHeaderTimeout: 5 * time.Second}
	log.Info("airlock host running", "plugins", h.Names(), "control", l.Addr().String(), "broker", cfg.Host.Broker)
	err = serve.HTTP(ctx, srv, l)
	h.Shutdown(context.Background())
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
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
	log := newLogger(cfg.Log, stderr)
	opts, closeEvidence, err := hostOptions(cfg, nil, log)
	if err != nil {
		return err
	}
	defer closeEvidence()
	e, name, err := host.Install(ctx, fs.Arg(0), cfg.Host.PluginsDir, cfg.Host.Lockfile, opts)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "installed %s: protocol v%d, binary sha256 %s, manifest sha256 %s\n",
		name, e.ProtocolVersion, e.BinarySHA256[:16], e.ManifestSHA256[:16])
	return err
}

// hostOptions builds what every plugin gets: broker, evidence log, policy,
// egress proxy and the compiled ports.
func hostOptions(cfg *config.Config, b broker.API, log *slog.Logger) (host.Options, func(), error) {
	ev, err := host.OpenEvidenceLog(cfg.Host.Evidence)
	if err != nil {
		return host.Options{}, nil, err
	}
	var policy *host.Policy
	if cfg.Host.Policy != "" {
		if policy, err = host.LoadPolicy(cfg.Host.Policy); err != nil {
			ev.Close()
			return host.Options{}, nil, err
		}
	} else {
		log.Warn("no host.policy: every action will be denied")
	}
	opts := host.Options{Broker: b, Evidence: ev, EgressProxy: cfg.Broker.EgressProxy, Policy: policy,
		Ports: hostPorts(), Log: log}
	if dir := cfg.Host.Artifacts; dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			ev.Close()
			return host.Options{}, nil, fmt.Errorf("host.artifacts: %s is not a directory", dir)
		}
		opts.Artifacts = host.DirArtifacts{Dir: dir}
	}
	return opts, func() { ev.Close() }, nil
}

func listenControl(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		_ = os.Remove(p)
		l, err := net.Listen("unix", p)
		if err == nil {
			err = os.Chmod(p, 0o600)
		}
		return l, err
	}
	return net.Listen("tcp", addr)
}
