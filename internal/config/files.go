package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/tokens"
)

// CheckFiles checks every file and directory the config names: that it
// exists, is of the right kind and can be read, that a file holding a
// secret is not readable by others, and that the file secret source is a
// map of path → field → string. It returns every problem at once;
// check-config runs it (the commands fail on the same files when they
// open them).
func (c *Config) CheckFiles() error {
	var errs []error
	check := func(key, path string, dir, secret bool) bool {
		if path == "" {
			return false
		}
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s: %s does not exist", key, path))
			return false
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %v", key, path, errors.Unwrap(err)))
			return false
		case dir && !st.IsDir():
			errs = append(errs, fmt.Errorf("%s: %s is not a directory", key, path))
			return false
		case !dir && !st.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("%s: %s is not a regular file", key, path))
			return false
		case secret && st.Mode().Perm()&0o077 != 0:
			errs = append(errs, fmt.Errorf("%s: %s is readable by others (mode %#o; chmod 600)", key, path, st.Mode().Perm()))
			return false
		}
		if dir {
			if _, err := os.ReadDir(path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s cannot be read", key, path))
			}
			return false
		}
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s cannot be read", key, path))
			return false
		}
		f.Close()
		return true
	}
	check("proxy.upstream_ca_file", c.Proxy.UpstreamCAFile, false, false)
	if check("broker.secrets.file", c.Broker.Secrets.File, false, true) {
		// Read as the broker reads it: a file of another shape passes
		// the checks above and then fails every request with 503.
		if err := (&broker.FileSource{Path: c.Broker.Secrets.File}).Reload(); err != nil {
			errs = append(errs, fmt.Errorf("broker.secrets.file: %w", err))
		}
	}
	check("broker.store.redis.password_file", c.Broker.Store.Redis.PasswordFile, false, true)
	check("broker.store.redis.ca_file", c.Broker.Store.Redis.CAFile, false, false)
	check("vault.ca_file", c.Vault.CAFile, false, false)
	check("vault.auth.token_file", c.Vault.Auth.TokenFile, false, true)
	check("vault.auth.role_id_file", c.Vault.Auth.RoleIDFile, false, true)
	check("vault.auth.secret_id_file", c.Vault.Auth.SecretIDFile, false, true)
	check("host.policy", c.Host.Policy, false, false)
	check("host.artifacts", c.Host.Artifacts, true, false)
	check("host.executa.sampling.fixture", c.Host.Executa.Sampling.Fixture, false, false)
	for i, p := range c.Host.Executa.Plugins {
		check(fmt.Sprintf("host.executa.plugins[%d].command", i), p.Command, false, false)
	}
	// Keys and tokens Airlock creates at first use: a missing one is
	// fine; one its group or others may read is refused (the commands
	// refuse it too when they load it).
	private := func(key, path string, gid int) {
		if path == "" {
			return
		}
		if err := peerauth.CheckPrivatePath(key, path, gid); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Tokens.Keys.Source == tokens.SourceFile {
		private("tokens.keys.path", c.Tokens.Keys.Path, peerauth.NoGroup)
	}
	private("host.evidence_key", c.Host.EvidenceKey, peerauth.NoGroup)
	private("proxy.intercept.ca_key_file", c.Proxy.Intercept.CAKeyFile, peerauth.NoGroup)
	private("host.control_token_file", c.Host.ControlTokenFile, peerauth.NoGroup)
	if gid, err := peerauth.LookupGroup(c.Broker.API.Group); err != nil {
		errs = append(errs, fmt.Errorf("broker.api.group: %w", err))
	} else {
		private("broker.api.token_file", c.Broker.API.TokenFile, gid)
	}
	if _, err := peerauth.LookupUIDs(c.Broker.API.AllowedUsers); err != nil {
		errs = append(errs, fmt.Errorf("broker.api.allowed_users: %w", err))
	}
	if _, err := peerauth.LookupUIDs(c.Host.ControlAllowedUsers); err != nil {
		errs = append(errs, fmt.Errorf("host.control_allowed_users: %w", err))
	}
	// A root host gives each plugin a uid of this range that no user or
	// group has; a range that holds some is the operator's to fix.
	if err := sandbox.CheckUIDRange("host.sandbox.uid_range", c.Host.Sandbox.UIDRange); err != nil {
		errs = append(errs, err)
	}
	if c.Host.Policy != "" {
		if _, err := policy.Load(c.Host.Policy); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("host.policy: %w", err))
		}
	}
	return errors.Join(errs...)
}
