package launch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// At the landlock level a plugin reaches the proxy only through a
// listener of its own, which the proxy serves knowing whose it is: the
// shared proxy port, where a connection cannot be told from another
// plugin's, is out of its reach, and its proxied request arrives on its
// own listener.
func TestLandlockOwnProxyListener(t *testing.T) {
	if !slices.Contains(sandbox.Detect().Levels(), sandbox.LevelLandlock) {
		t.Fatalf("this machine does not allow the landlock level: %s", sandbox.Detect())
	}
	shared := fakeProxy(t)
	var mu sync.Mutex
	var served []string // the addresses of the listeners handed over
	serve := func(plugin string, l net.Listener) (io.Closer, error) {
		if plugin != "attacker" {
			t.Errorf("listener handed over for plugin %q", plugin)
		}
		mu.Lock()
		served = append(served, l.Addr().String())
		mu.Unlock()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "proxied "+r.URL.Host)
		})}
		go func() { _ = srv.Serve(l) }()
		return srv, nil
	}
	for lang, argv := range attackers(t) {
		t.Run(lang, func(t *testing.T) {
			env := []string{"ATTACK_TCP=" + shared, "ATTACK_PROXIED=http://api.example.com/v1/x"}
			p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: append(argv[1:], "probe"), Env: env},
				Options{EgressProxy: shared, ProxyServe: serve, Sandbox: sandbox.Config{Level: sandbox.LevelLandlock, ReadOnly: []string{attackerDir}}})
			if err != nil {
				t.Fatal(err)
			}
			got := attempts(p)
			if err := p.Err(); err != nil {
				t.Fatalf("the attacker failed: %v (attempts %v)", err, got)
			}
			if at, ok := got["tcp "+shared]; !ok || at.Escaped {
				t.Errorf("the plugin reached the shared proxy port: %+v (made: %v)", at, ok)
			}
			if at := got["proxied"]; !at.Escaped {
				t.Errorf("the proxied request failed: %s", at.Detail)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(served) == 0 || served[len(served)-1] == shared || !strings.HasPrefix(served[len(served)-1], "127.0.0.1:") {
				t.Fatalf("listeners handed over: %v (shared %s)", served, shared)
			}
		})
	}
}

// A proxy that refuses a plugin's listener fails the plugin's start, at
// every level: relayed instead, its connections would reach the shared
// proxy port, where the proxy cannot tell whose they are.
func TestRefusedProxyListenerFailsTheStart(t *testing.T) {
	shared := fakeProxy(t)
	refuse := func(string, net.Listener) (io.Closer, error) { return nil, errors.New("serve refused it") }
	argv := attackers(t)["go"]
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: []string{"probe"}},
				Options{EgressProxy: shared, ProxyServe: refuse, Sandbox: sandbox.Config{Level: level, ReadOnly: []string{attackerDir}}})
			if err == nil {
				<-p.Exited()
				t.Fatal("the plugin started although the proxy refused its listener")
			}
			if !errors.Is(err, sandbox.ErrSetup) || !strings.Contains(err.Error(), "did not take the plugin's listener") {
				t.Fatalf("start: %v", err)
			}
		})
	}
}
