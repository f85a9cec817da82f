package main

import (
	"context"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

func cmdCheckConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check-config", stderr)
	path := configFlag(fs)
	checkSecrets := fs.Bool("vault", false, "also log in to Vault and check that every intent's secret and field can be read (values are never printed)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock check-config [--vault] [--config FILE | FILE]\n\nValidates the config and reports every problem at once; no secret is printed.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return errUsage
	}
	if fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if err := cfg.CheckFiles(); err != nil {
		return fmt.Errorf("invalid config:\n%w", err)
	}
	name := *path
	if name == "" {
		name = "embedded defaults"
	}
	if _, err := fmt.Fprintf(stdout, "%s: OK\n", name); err != nil {
		return err
	}
	// What this machine allows plugins, and what the config asks for.
	support := sandbox.Detect()
	fmt.Fprintf(stdout, "sandbox: %s\n", support)
	want := cfg.Host.Sandbox.Level
	if want == "" {
		want = sandbox.LevelAuto
	}
	if _, err := sandbox.Resolve(want); err != nil {
		return err
	}
	if lv, _ := sandbox.Resolve(want); lv == sandbox.LevelOff {
		fmt.Fprintf(stdout, "sandbox: WARNING: plugins run unconfined (host.sandbox.level: %s)\n", want)
	}
	if !*checkSecrets {
		return nil
	}
	log := newLogger(cfg.Log, stderr)
	vc, err := daemon.ConnectVault(ctx, cfg, log)
	if err != nil {
		return err
	}
	if vc != nil {
		fmt.Fprintf(stdout, "vault: logged in to %s (method %s)\n", cfg.Vault.Address, methodName(cfg.Vault.Auth.Method))
	}
	b, _, closeBroker, err := daemon.NewBroker(cfg, vc, nil, log)
	if err != nil {
		return err
	}
	defer closeBroker()
	failed := 0
	for _, intent := range cfg.Broker.IntentNames() {
		in := cfg.Broker.Intents[intent]
		if in.Secret.Source == "" {
			fmt.Fprintf(stdout, "intent %s: not bound to a secret\n", intent)
			continue
		}
		if in.Secret.Source == broker.SourceVaultLease {
			// Reading it would create a credential: it is obtained at an
			// invocation's first use only.
			fmt.Fprintf(stdout, "intent %s: leased (vault_lease, obtained per invocation; not read here)\n", intent)
			continue
		}
		s, err := b.SecretFor(ctx, intent, true)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "intent %s: FAILED: %v\n", intent, err)
			continue
		}
		fmt.Fprintf(stdout, "intent %s: readable (%s, version %d)\n", intent, in.Secret.Source, s.Version)
	}
	if failed > 0 {
		return fmt.Errorf("%d intent(s) cannot read their secret", failed)
	}
	if len(cfg.Broker.Intents) == 0 {
		// A valid config with nothing to read: not a failure after "OK".
		fmt.Fprintln(stdout, "vault: nothing to read: no intents configured (broker.intents)")
	}
	return nil
}

func methodName(m string) string {
	if m == "" {
		return "token"
	}
	return m
}
