package vault

import (
	"errors"
	"fmt"
	"os"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
)

// NewClient returns a logged-in Vault client for cfg.
func NewClient(cfg Config) (*vaultapi.Client, error) {
	if !cfg.Configured() {
		return nil, errors.New("vault.address is not set")
	}
	vc := vaultapi.DefaultConfig()
	if vc.Error != nil {
		return nil, fmt.Errorf("vault client defaults: %w", vc.Error)
	}
	vc.Address = cfg.Address
	vc.Timeout = DefaultTimeout
	if cfg.Timeout > 0 {
		vc.Timeout = cfg.Timeout
	}
	if cfg.CAFile != "" || cfg.TLSServerName != "" {
		if err := vc.ConfigureTLS(&vaultapi.TLSConfig{CACert: cfg.CAFile, TLSServerName: cfg.TLSServerName}); err != nil {
			return nil, fmt.Errorf("vault TLS: %w", err)
		}
	}
	c, err := vaultapi.NewClient(vc)
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	// NewClient reads VAULT_* from the environment; the config decides.
	c.SetAddress(cfg.Address)
	c.SetNamespace(cfg.Namespace)
	c.ClearToken()
	tok, err := loadToken(cfg.Auth)
	if err != nil {
		return nil, err
	}
	c.SetToken(tok)
	return c, nil
}

func loadToken(a AuthConfig) (string, error) {
	if a.TokenFile == "" {
		t := os.Getenv("VAULT_TOKEN")
		if t == "" {
			return "", errors.New("vault.auth: no token_file and VAULT_TOKEN is empty")
		}
		return t, nil
	}
	b, err := os.ReadFile(a.TokenFile)
	if err != nil {
		return "", fmt.Errorf("vault.auth.token_file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", errors.New("vault.auth.token_file: file is empty")
	}
	return t, nil
}
