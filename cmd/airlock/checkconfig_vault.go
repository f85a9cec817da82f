package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/vault"
)

// checkVault is check-config's --vault stage: log in as serve would and
// read every intent's secret (values never printed). A wrapped AppRole
// secret id is single-use: it is looked up, not unwrapped, and the
// secrets are not read, since logging in would use it up and leave
// airlock serve unable to log in.
func checkVault(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) error {
	if !cfg.Vault.Configured() {
		fmt.Fprintln(stdout, "vault: not configured (no vault.address)")
		return checkIntents(ctx, cfg, nil, stdout, stderr)
	}
	if cfg.Vault.Validate() != nil {
		fmt.Fprintln(stdout, "vault: not checked: the vault section has problems (above)")
		return nil
	}
	a := cfg.Vault.Auth
	if a.Method == vault.AuthAppRole && a.SecretIDWrapped {
		info, err := vault.LookupWrappedSecretID(ctx, cfg.Vault)
		if err != nil {
			return fmt.Errorf("vault.auth.secret_id_file: %w", err)
		}
		fmt.Fprintf(stdout, "vault: the wrapped secret id is live until %s (looked up, not unwrapped: it is single-use and airlock serve needs it)\n",
			info.Expires.UTC().Format(time.RFC3339))
		fmt.Fprintln(stdout, "vault: intents not read: logging in would use up the wrapped secret id")
		return nil
	}
	log := newLogger(cfg.Log, stderr)
	vc, err := daemon.ConnectVault(ctx, cfg, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "vault: logged in (method %s)\n", methodName(a.Method))
	return checkIntents(ctx, cfg, vc, stdout, stderr)
}

// checkIntents reads every bound intent's secret through a broker built
// as serve builds it.
func checkIntents(ctx context.Context, cfg *config.Config, vc *vault.Client, stdout, stderr io.Writer) error {
	if cfg.Broker.Validate() != nil {
		fmt.Fprintln(stdout, "intents: not read: the broker section has problems (above)")
		return nil
	}
	if len(cfg.Broker.Intents) == 0 {
		// A valid config with nothing to read: not a failure.
		fmt.Fprintln(stdout, "vault: nothing to read: no intents configured (broker.intents)")
		return nil
	}
	b, _, closeBroker, err := daemon.NewBroker(cfg, vc, nil, newLogger(cfg.Log, stderr))
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
	return nil
}

func methodName(m string) string {
	if m == "" {
		return "token"
	}
	return m
}
