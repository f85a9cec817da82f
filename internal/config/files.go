package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/airlock-dev/airlock/host"
)

// CheckFiles checks every file and directory the config names: that it
// exists, is of the right kind and can be read, and that a file holding a
// secret is not readable by others. It returns every problem at once;
// check-config runs it (the commands fail on the same files when they
// open them).
func (c *Config) CheckFiles() error {
	var errs []error
	check := func(key, path string, dir, secret bool) {
		if path == "" {
			return
		}
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s: %s does not exist", key, path))
			return
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %v", key, path, errors.Unwrap(err)))
			return
		case dir && !st.IsDir():
			errs = append(errs, fmt.Errorf("%s: %s is not a directory", key, path))
			return
		case !dir && !st.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("%s: %s is not a regular file", key, path))
			return
		case secret && st.Mode().Perm()&0o077 != 0:
			errs = append(errs, fmt.Errorf("%s: %s is readable by others (mode %#o; chmod 600)", key, path, st.Mode().Perm()))
		}
		if dir {
			if _, err := os.ReadDir(path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s cannot be read", key, path))
			}
			return
		}
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s cannot be read", key, path))
			return
		}
		f.Close()
	}
	check("proxy.upstream_ca_file", c.Proxy.UpstreamCAFile, false, false)
	check("broker.secrets.file", c.Broker.Secrets.File, false, true)
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
	if c.Host.Policy != "" {
		if _, err := host.LoadPolicy(c.Host.Policy); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("host.policy: %w", err))
		}
	}
	return errors.Join(errs...)
}
