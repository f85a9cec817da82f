package daemon_test

import (
	"context"
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/daemon"
	"github.com/airlock-dev/airlock/internal/config"
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
