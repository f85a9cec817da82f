package daemon

import (
	"context"
	"fmt"
	stdlog "log"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/vault"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

// ConnectVault logs in to Vault when the config names it; nil otherwise.
// The caller runs Client.Run to keep the token alive.
func ConnectVault(ctx context.Context, cfg *config.Config, log *slog.Logger) (*vault.Client, error) {
	if !cfg.Vault.Configured() {
		return nil, nil
	}
	vc, err := vault.Connect(ctx, cfg.Vault, log)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	return vc, nil
}

// startVault logs in to Vault when the config names it (nil otherwise),
// for a long-running process: a login that fails while Vault is down is
// retried by Client.Run instead of ending the start (vault.Start).
func startVault(ctx context.Context, cfg *config.Config, log *slog.Logger) (*vault.Client, error) {
	if !cfg.Vault.Configured() {
		return nil, nil
	}
	vc, err := vault.Start(ctx, cfg.Vault, log)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	return vc, nil
}

// keySource builds the signing-key source the config names.
func keySource(cfg *config.Config, vc *vault.Client) (tokens.KeySource, error) {
	k := cfg.Tokens.Keys
	switch k.Source {
	case tokens.SourceFile:
		return &tokens.FileSource{Path: k.Path}, nil
	case tokens.SourceVault:
		if vc == nil {
			return nil, fmt.Errorf("tokens.keys.source vault needs the vault section")
		}
		return &tokens.VaultSource{Client: vc.API, Mount: k.Mount, Path: k.Path}, nil
	default:
		return &tokens.MemorySource{}, nil
	}
}

// NewRing loads (or creates) the signing-key ring.
func NewRing(ctx context.Context, cfg *config.Config, vc *vault.Client, log *slog.Logger) (*tokens.Ring, error) {
	src, err := keySource(cfg, vc)
	if err != nil {
		return nil, err
	}
	ring, err := tokens.NewRing(ctx, src, ringOptions(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("signing keys (%s): %w", cfg.Tokens.Keys.Source, err)
	}
	return ring, nil
}

// newPendingRing is the signing-key ring with no key yet, for a serve
// that starts while the key source cannot be read.
func newPendingRing(cfg *config.Config, vc *vault.Client, log *slog.Logger) (*tokens.Ring, error) {
	src, err := keySource(cfg, vc)
	if err != nil {
		return nil, err
	}
	return tokens.NewPendingRing(src, ringOptions(cfg, log))
}

// activeKID names the active signing key, "none" while there is none.
func activeKID(ring *tokens.Ring) string {
	if k := ring.Active(); k != nil {
		return k.ID
	}
	return "none"
}

func ringOptions(cfg *config.Config, log *slog.Logger) tokens.RingOptions {
	return tokens.RingOptions{Algorithm: cfg.Tokens.Algorithm, Retention: cfg.Tokens.Retention(),
		RotateEvery: cfg.Tokens.RotateEvery, Logger: log}
}

// RingForCLI connects to Vault only when the key source needs it.
func RingForCLI(ctx context.Context, cfg *config.Config, log *slog.Logger) (*tokens.Ring, error) {
	var vc *vault.Client
	if cfg.Tokens.Keys.Source == tokens.SourceVault {
		var err error
		if vc, err = ConnectVault(ctx, cfg, log); err != nil {
			return nil, err
		}
	}
	return NewRing(ctx, cfg, vc, log)
}

// NewIssuer is the token issuer the config describes, over ring.
func NewIssuer(cfg *config.Config, ring *tokens.Ring) *tokens.Issuer {
	return tokens.NewIssuer(ring, tokens.IssuerOptions{
		Issuer: cfg.Tokens.Issuer, TTL: cfg.Tokens.TTL, Grace: cfg.Tokens.Grace,
	})
}

// secretSources builds the secret sources the config makes available.
func secretSources(cfg *config.Config, vc *vault.Client) map[string]broker.SecretSource {
	sources := map[string]broker.SecretSource{}
	if vc != nil {
		sources[broker.SourceVault] = &broker.VaultSource{Client: vc.API, OnAuthError: vc.Reauth}
	}
	if cfg.Broker.Secrets.File != "" {
		sources[broker.SourceFile] = &broker.FileSource{Path: cfg.Broker.Secrets.File}
	}
	return sources
}

// NewBroker builds the broker and returns a function that runs its
// background work until ctx ends (memory-store sweeping, or the Redis
// store's cache invalidation feed), and a closer.
func NewBroker(cfg *config.Config, vc *vault.Client, reg prometheus.Registerer, log *slog.Logger) (*broker.Broker, func(context.Context), func(), error) {
	return newBroker(cfg, vc, reg, log, nil)
}

// newBroker is NewBroker with secret sources that replace the config's of
// the same name.
func newBroker(cfg *config.Config, vc *vault.Client, reg prometheus.Registerer, log *slog.Logger,
	secrets map[string]broker.SecretSource) (*broker.Broker, func(context.Context), func(), error) {
	bc := cfg.Broker
	m := broker.NewMetrics(reg)
	var store broker.Store
	var run func(context.Context)
	closer := func() {}
	switch bc.Store.Type {
	case broker.StoreRedis:
		rs, err := broker.NewRedisStore(bc.Store.Redis, bc.ExpiredRetention, bc.MaxHandleLifetime)
		if err != nil {
			return nil, nil, nil, err
		}
		rs.SetLogger(log)
		store, closer, run = rs, func() { rs.Close() }, rs.Run
		pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if w := rs.Persistence(pctx); w != "" {
			log.Warn(w)
		}
		cancel()
	default:
		ms := broker.NewMemoryStore(bc.Store.MaxHandles, bc.ExpiredRetention, bc.MaxHandleLifetime, nil)
		store = ms
		run = func(ctx context.Context) { ms.Run(ctx, 30*time.Second) }
	}
	sources := secretSources(cfg, vc)
	maps.Copy(sources, secrets)
	cache := broker.NewSecretCache(sources, bc.Secrets.CacheTTL, bc.Secrets.StaleIfError, m, log)
	leases, err := newLeases(bc, vc, store, reg, log)
	if err != nil {
		closer()
		return nil, nil, nil, err
	}
	loops := []func(context.Context){run}
	if leases != nil {
		loops = append(loops, leases.Run) // its final sweep runs once ctx ends
	}
	b := broker.New(bc, store, cache, broker.Options{Logger: log, Metrics: m, Leases: leases})
	loops = append(loops, b.RunOwed) // revocations the store did not acknowledge
	return b, func(ctx context.Context) { runAll(ctx, loops...) }, closer, nil
}

// runAll runs each loop on its own goroutine until ctx ends and returns
// once every one has returned: a loop's last work (the lease manager's
// final revocation sweep) is done before the caller closes what it uses.
func runAll(ctx context.Context, loops ...func(context.Context)) {
	var wg sync.WaitGroup
	for _, f := range loops {
		wg.Go(func() { f(ctx) })
	}
	wg.Wait()
}

// LogRedis routes go-redis's own messages (pool dial failures) into log
// instead of stderr. go-redis has one logger per process, so this is for
// main to call once; no constructor sets it.
func LogRedis(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
	// Go's standard logger too: net/http's Transport writes the first
	// bytes of an unsolicited upstream response there, which may quote a
	// secret an upstream reflected. The line is counted, its text never
	// written.
	stdlog.SetFlags(0)
	stdlog.SetOutput(withheldLog{log})
}

// withheldLog stands in for the standard logger's output: one warning
// per line, without the line.
type withheldLog struct{ log *slog.Logger }

func (w withheldLog) Write(p []byte) (int, error) {
	w.log.Warn("a Go library wrote to the standard logger; its text is withheld (it may quote upstream bytes)", "bytes", len(p))
	return len(p), nil
}

// redisLogger is go-redis's logger interface over slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn("redis: " + fmt.Sprintf(format, v...))
}

// InterceptCA runs a status, stage or promote action on the proxy's
// intercept CA (see proxy.InterceptCA), connecting to Vault when the CA
// lives there.
func InterceptCA(ctx context.Context, cfg *config.Config, action string, log *slog.Logger) (proxy.CAStatus, error) {
	ic := cfg.Proxy.WithDefaults().Intercept
	var vc *vault.Client
	if ic.Vault.Path != "" {
		var err error
		if vc, err = ConnectVault(ctx, cfg, log); err != nil {
			return proxy.CAStatus{}, err
		}
		if vc == nil {
			return proxy.CAStatus{}, fmt.Errorf("proxy.intercept.vault needs the vault section")
		}
		return proxy.InterceptCA(ctx, ic, vc.API, action)
	}
	return proxy.InterceptCA(ctx, ic, nil, action)
}
