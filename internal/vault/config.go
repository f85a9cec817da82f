package vault

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/airlock-dev/airlock/internal/hostport"
)

// Auth methods.
const (
	AuthToken      = "token"
	AuthAppRole    = "approle"
	AuthKubernetes = "kubernetes"
)

// DefaultServiceAccountTokenFile is where Kubernetes mounts a pod's token.
const DefaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

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
	// Method is token (the default), approle or kubernetes.
	Method string `yaml:"method"`
	// MountPath of the auth method; default: the method's name.
	MountPath string `yaml:"mount_path"`

	// TokenFile holds the token for method token; when empty the airlock
	// process's VAULT_TOKEN is used.
	TokenFile string `yaml:"token_file"`

	// AppRole: the role id (inline or in a file) and the secret id file.
	// With SecretIDWrapped the file holds a response-wrapping token whose
	// unwrapped secret id is kept in memory only.
	RoleID          string `yaml:"role_id"`
	RoleIDFile      string `yaml:"role_id_file"`
	SecretIDFile    string `yaml:"secret_id_file"`
	SecretIDWrapped bool   `yaml:"secret_id_wrapped"`

	// Kubernetes: the Vault role and the service account token file.
	Role                    string `yaml:"role"`
	ServiceAccountTokenFile string `yaml:"service_account_token_file"`
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
	} else if err := hostport.URL(u.Host); err != nil {
		errs = append(errs, fmt.Errorf("vault.address: %w", err))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("vault.timeout: must not be negative"))
	}
	a := c.Auth
	switch a.Method {
	case "", AuthToken:
		if a.RoleID != "" || a.RoleIDFile != "" || a.SecretIDFile != "" || a.Role != "" {
			errs = append(errs, errors.New("vault.auth: role and secret id settings need method approle or kubernetes"))
		}
	case AuthAppRole:
		if (a.RoleID == "") == (a.RoleIDFile == "") {
			errs = append(errs, errors.New("vault.auth: approle needs exactly one of role_id, role_id_file"))
		}
		if a.SecretIDFile == "" {
			errs = append(errs, errors.New("vault.auth.secret_id_file: required for approle"))
		}
	case AuthKubernetes:
		if a.Role == "" {
			errs = append(errs, errors.New("vault.auth.role: required for kubernetes"))
		}
	default:
		errs = append(errs, errors.New("vault.auth.method: must be one of: token, approle, kubernetes"))
	}
	return errors.Join(errs...)
}
