package launch

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/egressenv"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

// The environment a plugin starts with: its own variables, the egress
// variables the launch layer owns (never the configured ones), a pass in
// HTTPS_PROXY only, the CA copy in its private directory, NO_PROXY by
// host; and the pass is revoked once the process exits.
func TestEnvironmentAndPassRevokedAfterExit(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := broker.New(broker.Config{Intents: map[string]broker.Intent{}}.WithDefaults(),
		broker.NewMemoryStore(100, time.Minute, time.Hour, nil), nil, broker.Options{})
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			p, err := Start(context.Background(), Request{Plugin: "envdump", Path: "/usr/bin/env",
				Env:       []string{"PLUGIN_SETTING=1", "SSL_CERT_FILE=/evil.pem", "HTTP_PROXY=http://evil"},
				PassDests: []broker.Destination{{Host: "api.example.com", Port: 443}}, Direct: []string{"127.0.0.1:9468"},
			}, Options{Broker: b, EgressProxy: "127.0.0.1:8899", InterceptCAFile: ca, Sandbox: sandbox.Config{Level: level}})
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{}
			sc := bufio.NewScanner(p.Stdout())
			for sc.Scan() {
				k, v, _ := strings.Cut(sc.Text(), "=")
				vars[k] = v
			}
			<-p.Exited()
			caCopy := filepath.Join(p.Dir(), egressenv.CAName)
			pass := strings.TrimSuffix(strings.TrimPrefix(vars["HTTPS_PROXY"], "http://airlock:"), "@127.0.0.1:8899")
			for k, want := range map[string]string{"PLUGIN_SETTING": "1", "HTTP_PROXY": "http://127.0.0.1:8899",
				"SSL_CERT_FILE": caCopy, "NODE_EXTRA_CA_CERTS": caCopy, "NO_PROXY": "127.0.0.1", "TMPDIR": p.Dir()} {
				if vars[k] != want {
					t.Errorf("%s=%q, want %q", k, vars[k], want)
				}
			}
			if !broker.LooksLikeHandle(pass) || strings.Contains(vars["HTTP_PROXY"], pass) {
				t.Fatalf("the pass is not in HTTPS_PROXY alone: %v", vars)
			}
			if _, err := os.Stat(p.Dir()); !os.IsNotExist(err) {
				t.Errorf("the private directory outlived the process: %v", err)
			}
			if _, err := b.Resolve(context.Background(), pass); !errors.Is(err, broker.ErrHandleRevoked) {
				t.Fatalf("the pass after the exit: %v, want revoked", err)
			}
		})
	}
}

// A program outside what the sandbox shows is refused before anything
// starts, naming the setting that grants it.
func TestProgramNotVisible(t *testing.T) {
	dir, err := os.MkdirTemp("", "airlock-hidden-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	prog := filepath.Join(dir, "plugin")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, level := range levels(t) {
		_, err := Start(context.Background(), Request{Plugin: "p", Path: prog}, Options{Sandbox: sandbox.Config{Level: level}})
		if !errors.Is(err, sandbox.ErrNotVisible) || !strings.Contains(err.Error(), "host.sandbox.plugins.p.read_only") {
			t.Fatalf("%s: %v", level, err)
		}
	}
}
