package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/daemon"
)

// Serve runs until its context ends; OnReady says where it listens.
func ExampleServe() {
	state, _ := os.MkdirTemp("", "airlock-example-")
	defer os.RemoveAll(state)
	cfg, err := config.Parse([]byte("version: v1\nstate_dir: " + state + "\nadmin: {listen: 127.0.0.1:0}\nproxy: {listen: 127.0.0.1:0}\n"))
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = daemon.Serve(ctx, cfg, daemon.Options{OnReady: func(r daemon.Ready) {
		fmt.Println("serving: admin and proxy listeners up:", r.Admin != "" && r.Proxy != "")
		cancel() // a real caller cancels on SIGTERM
	}})
	fmt.Println("stopped:", err)
	// Output:
	// serving: admin and proxy listeners up: true
	// stopped: <nil>
}

// Host is how `airlock host` runs: load the config, run until SIGTERM. It
// needs a running `airlock serve` on host.broker and installed plugins, so
// this example only compiles.
func ExampleHost() {
	cfg, err := config.Load("/etc/airlock/airlock.yaml")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := daemon.Host(ctx, cfg, daemon.Options{Log: log, Version: "v1.0.0"}); err != nil {
		log.Error("host stopped", "err", err)
		os.Exit(1)
	}
}
