package vault

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"
	"github.com/hashicorp/vault/api/auth/kubernetes"
)

// Client is a Vault API client whose token is kept alive: renewed with a
// LifetimeWatcher while Vault allows, and obtained again by logging in
// when renewal stops (max TTL reached, token revoked) or when a caller
// reports that Vault refused it.
type Client struct {
	API *vaultapi.Client

	cfg    Config
	log    *slog.Logger
	reauth chan struct{}

	mu       sync.Mutex
	secretID string // unwrapped AppRole secret id, memory only
	auth     *vaultapi.Secret
	loggedIn time.Time // the last successful login
	logins   int

	// now is the clock that dates logins for ReauthQuiet (time.Now; a
	// test moves it instead of sleeping).
	now func() time.Time
}

// ReauthQuiet is how long after a login further Reauth requests are
// ignored: they come from requests that used the token being replaced, so
// one failure burst costs one login.
const ReauthQuiet = 2 * time.Second

// Logins counts the successful logins (the first included).
func (c *Client) Logins() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logins
}

// NewAPIClient returns a Vault API client for cfg's address and TLS,
// without a token.
func NewAPIClient(cfg Config) (*vaultapi.Client, error) {
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
	vc.MaxRetries = 1
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
	return c, nil
}

// Connect logs in per cfg. Call Run to keep the token alive.
func Connect(ctx context.Context, cfg Config, log *slog.Logger) (*Client, error) {
	c, err := newClient(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := c.login(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// newClient is a Client not logged in yet.
func newClient(cfg Config, log *slog.Logger) (*Client, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	api, err := NewAPIClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{API: api, cfg: cfg, log: log, reauth: make(chan struct{}, 1), now: time.Now}, nil
}

// Start is Connect for a long-running process that must come up while
// Vault is down: when the first login fails for any reason but an
// unreadable credential file, the client is returned without a token
// (every call fails until Vault answers) and Run logs in, with backoff,
// until it succeeds. A missing or unreadable role id, secret id or token
// file is still an error: waiting would not fix it.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Client, error) {
	c, err := newClient(cfg, log)
	if err != nil {
		return nil, err
	}
	err = c.login(ctx)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil, err
	}
	c.log.Warn("vault login failed; starting without a token and retrying (not ready until it succeeds)", "err", err.Error())
	c.Reauth()
	return c, nil
}

// login obtains a token per the auth method and installs it.
func (c *Client) login(ctx context.Context) error {
	a := c.cfg.Auth
	switch a.Method {
	case "", AuthToken:
		tok, err := loadToken(a)
		if err != nil {
			return err
		}
		c.API.SetToken(tok)
		// A renewable token is kept alive; a root or periodic-less token
		// simply has no auth info to watch.
		s, err := c.API.Auth().Token().LookupSelfWithContext(ctx)
		if err == nil && s != nil {
			if renewable, _ := s.TokenIsRenewable(); renewable {
				ttl, _ := s.TokenTTL()
				c.setAuth(&vaultapi.Secret{Auth: &vaultapi.SecretAuth{ClientToken: tok, Renewable: true, LeaseDuration: int(ttl.Seconds())}})
			}
		}
		return nil
	case AuthAppRole:
		return c.loginAppRole(ctx)
	case AuthKubernetes:
		path := a.ServiceAccountTokenFile
		if path == "" {
			path = DefaultServiceAccountTokenFile
		}
		opts := []kubernetes.LoginOption{kubernetes.WithServiceAccountTokenPath(path)}
		if a.MountPath != "" {
			opts = append(opts, kubernetes.WithMountPath(a.MountPath))
		}
		m, err := kubernetes.NewKubernetesAuth(a.Role, opts...)
		if err != nil {
			return fmt.Errorf("vault kubernetes auth: %w", err)
		}
		return c.loginWith(ctx, m, "kubernetes")
	}
	return fmt.Errorf("vault.auth.method %q is not supported", a.Method)
}

func (c *Client) loginAppRole(ctx context.Context) error {
	a := c.cfg.Auth
	roleID := a.RoleID
	if a.RoleIDFile != "" {
		b, err := os.ReadFile(a.RoleIDFile)
		if err != nil {
			return fmt.Errorf("vault.auth.role_id_file: %w", err)
		}
		roleID = strings.TrimSpace(string(b))
	}
	secretID, err := c.appRoleSecretID(ctx)
	if err != nil {
		return err
	}
	opts := []approle.LoginOption{}
	if a.MountPath != "" {
		opts = append(opts, approle.WithMountPath(a.MountPath))
	}
	m, err := approle.NewAppRoleAuth(roleID, &approle.SecretID{FromString: secretID}, opts...)
	if err != nil {
		return fmt.Errorf("vault approle auth: %w", err)
	}
	return c.loginWith(ctx, m, "approle")
}

// appRoleSecretID reads the secret id; a wrapped one is unwrapped once
// (wrapping tokens are single-use) and kept in memory for later logins.
func (c *Client) appRoleSecretID(ctx context.Context) (string, error) {
	c.mu.Lock()
	cached := c.secretID
	c.mu.Unlock()
	if cached != "" {
		return cached, nil
	}
	b, err := os.ReadFile(c.cfg.Auth.SecretIDFile)
	if err != nil {
		return "", fmt.Errorf("vault.auth.secret_id_file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", errors.New("vault.auth.secret_id_file: file is empty")
	}
	if !c.cfg.Auth.SecretIDWrapped {
		return v, nil
	}
	unwrapper, err := NewAPIClient(c.cfg)
	if err != nil {
		return "", err
	}
	s, err := unwrapper.Logical().UnwrapWithContext(ctx, v)
	if err != nil {
		return "", fmt.Errorf("vault: unwrap AppRole secret id: the wrapping token is single-use and was used already (a restart needs a new one: run deploy/vault/bootstrap.sh again, or use Kubernetes auth or an unwrapped secret id; see docs/operations.md) or it expired: %w", redactVaultError(err))
	}
	id, _ := s.Data["secret_id"].(string)
	if id == "" {
		return "", errors.New("vault: the wrapped response holds no secret_id")
	}
	c.mu.Lock()
	c.secretID = id
	c.mu.Unlock()
	return id, nil
}

func (c *Client) loginWith(ctx context.Context, m vaultapi.AuthMethod, name string) error {
	s, err := c.API.Auth().Login(ctx, m)
	if err != nil {
		return fmt.Errorf("vault %s login: %w", name, redactVaultError(err))
	}
	if s == nil || s.Auth == nil {
		return fmt.Errorf("vault %s login returned no token", name)
	}
	c.setAuth(s)
	c.log.Info("vault login", "method", name, "ttl", time.Duration(s.Auth.LeaseDuration)*time.Second, "renewable", s.Auth.Renewable)
	return nil
}

func (c *Client) setAuth(s *vaultapi.Secret) {
	c.mu.Lock()
	c.loggedIn = c.now()
	c.logins++
	c.auth = s
	c.mu.Unlock()
}

// Reauth asks Run to log in again (for example after Vault answered 403).
// It never blocks; repeated calls while one is pending collapse.
func (c *Client) Reauth() {
	select {
	case c.reauth <- struct{}{}:
	default:
	}
}

// Run keeps the token alive until ctx ends: renew while possible, log in
// again when renewal stops or Reauth is called, with backoff on failure.
func (c *Client) Run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		c.mu.Lock()
		auth := c.auth
		c.mu.Unlock()
		var done <-chan error
		var w *vaultapi.LifetimeWatcher
		if auth != nil && auth.Auth != nil && auth.Auth.Renewable {
			var err error
			w, err = c.API.NewLifetimeWatcher(&vaultapi.LifetimeWatcherInput{Secret: auth})
			if err == nil {
				go w.Start()
				done = w.DoneCh()
			}
		}
		var renew <-chan *vaultapi.RenewOutput
		if w != nil {
			renew = w.RenewCh()
		}
		// With a login method but no token (the last login failed: Vault
		// was down at start, or still is), log in again at once: nothing
		// else would ask.
		static := c.cfg.Auth.Method == "" || c.cfg.Auth.Method == AuthToken
		relogin := auth == nil && !static
		for !relogin && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case err := <-done:
				if err != nil {
					c.log.Warn("vault token renewal stopped", "err", redactVaultError(err))
				}
				relogin = true
			case <-renew:
				c.log.Debug("vault token renewed")
			case <-c.reauth:
				c.mu.Lock()
				recent := c.now().Sub(c.loggedIn) < ReauthQuiet
				first := c.logins == 0
				c.mu.Unlock()
				if recent {
					// A request that used the token just replaced.
					continue
				}
				if first {
					c.log.Info("vault: logging in (the first login failed)")
				} else {
					c.log.Warn("vault refused the token; logging in again")
				}
				relogin = true
			}
		}
		if w != nil {
			w.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if c.cfg.Auth.Method == "" || c.cfg.Auth.Method == AuthToken {
			if err := c.login(ctx); err != nil {
				c.log.Warn("vault token reload failed", "err", err)
			}
			// A static token cannot be renewed past its max TTL; wait for
			// an operator (a new token file) or another Reauth.
			select {
			case <-ctx.Done():
				return
			case <-c.reauth:
				c.Reauth()
			case <-time.After(time.Minute):
			}
			continue
		}
		if err := c.login(ctx); err != nil {
			c.log.Warn("vault login failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			case <-c.reauth:
				// A request failed while waiting: keep the request (the
				// login below is for it), then wait out the backoff's
				// floor so a flood of failures cannot hammer the login.
				select {
				case <-ctx.Done():
					return
				case <-time.After(min(backoff, time.Second)):
				}
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
	}
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

// redactVaultError keeps Vault's status and error messages (which name
// no secret) and drops the request URL's query.
func redactVaultError(err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		return fmt.Errorf("vault answered %d: %s", re.StatusCode, strings.Join(re.Errors, "; "))
	}
	return err
}
