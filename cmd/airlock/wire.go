package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/vault"
	"github.com/airlock-dev/airlock/tokens"
)

// keySource builds the signing-key source the config names.
func keySource(cfg *config.Config) (tokens.KeySource, error) {
	k := cfg.Tokens.Keys
	switch k.Source {
	case tokens.SourceFile:
		return &tokens.FileSource{Path: k.Path}, nil
	case tokens.SourceVault:
		c, err := vault.NewClient(cfg.Vault)
		if err != nil {
			return nil, err
		}
		return &tokens.VaultSource{Client: c, Mount: k.Mount, Path: k.Path}, nil
	default:
		return &tokens.MemorySource{}, nil
	}
}

// newRing loads (or creates) the signing-key ring.
func newRing(ctx context.Context, cfg *config.Config, log *slog.Logger) (*tokens.Ring, error) {
	src, err := keySource(cfg)
	if err != nil {
		return nil, err
	}
	ring, err := tokens.NewRing(ctx, src, tokens.RingOptions{
		Algorithm:   cfg.Tokens.Algorithm,
		Retention:   cfg.Tokens.Retention(),
		RotateEvery: cfg.Tokens.RotateEvery,
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("signing keys (%s): %w", cfg.Tokens.Keys.Source, err)
	}
	return ring, nil
}

func newIssuer(cfg *config.Config, ring *tokens.Ring) *tokens.Issuer {
	return tokens.NewIssuer(ring, tokens.IssuerOptions{
		Issuer: cfg.Tokens.Issuer, TTL: cfg.Tokens.TTL, Grace: cfg.Tokens.Grace,
	})
}
