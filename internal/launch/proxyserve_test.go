package launch

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// The proxy that takes a plugin's own listener over (Options.ProxyServe)
// is told whose it is: the egress proxy refuses any other plugin's
// handle on it. It is asked at every sandbox level: each gives the plugin
// a listener of its own.
func TestProxyServeNamesThePlugin(t *testing.T) {
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			var mu sync.Mutex
			var named []string
			serve := func(plugin string, l net.Listener) (io.Closer, error) {
				mu.Lock()
				named = append(named, plugin)
				mu.Unlock()
				return l, nil // closing the listener ends its service
			}
			p, err := Start(context.Background(), Request{Plugin: "example.tickets", Path: "/usr/bin/env"},
				Options{EgressProxy: fakeProxy(t), ProxyServe: serve, Sandbox: sandbox.Config{Level: level}})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, p.Stdout())
			<-p.Exited()
			mu.Lock()
			defer mu.Unlock()
			// Both levels hand over a listener of the plugin's own: in its
			// network namespace, or (landlock) a loopback one the host bound.
			if len(named) != 1 || named[0] != "example.tickets" {
				t.Fatalf("ProxyServe asked for %q at the %s level", named, level)
			}
		})
	}
}
