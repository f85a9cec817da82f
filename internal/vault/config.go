package vault

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Auth methods.
const (
	AuthToken = "token"
)

// DefaultTimeout bounds one Vault request.
const DefaultTimeout = 10 * time.Second

// Config says how to reach and log in to Vault. The zero value is "not
// configured".
type Config struct {
	Address       string        `yaml:"address"`
	Namespace     string        `yaml:"namespace"`
	CAFile        string        `yaml:"ca_file"`
	TLSServerName string        `yaml:"tls_server_name"`
	Timeout       time.Duration `yaml:"timeout"`
	Auth          AuthConfig    `yaml:"auth"`
}

// AuthConfig selects how Airlock logs in.
type AuthConfig struct {
	// Method is "token" (the default).
	Method string `yaml:"method"`
	// TokenFile holds the token for method token; when empty the airlock
	// process's VAULT_TOKEN is used.
	TokenFile string `yaml:"token_file"`
}

// Configured reports whether a Vault address is set.
func (c Config) Configured() bool { return c.Address != "" }

// Validate returns every problem at once.
func (c Config) Validate() error {
	if !c.Configured() {
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("vault.address: must be an http:// or https:// URL"))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("vault.timeout: must not be negative"))
	}
	switch c.Auth.Method {
	case "", AuthToken:
	default:
		errs = append(errs, fmt.Errorf("vault.auth.method: %q is not one of: token", c.Auth.Method))
	}
	return errors.Join(errs...)
}
