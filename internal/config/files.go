package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/tokens"
)

// Scope is whose files CheckFilesOf checks. airlock serve and airlock host
// run as different users, and neither may enter the other's state
// directory: each unit checks the files its own process opens.
type Scope int

// Scopes.
const (
	ScopeAll   Scope = iota // both processes' files (one machine, one user)
	ScopeServe              // airlock serve's: keys, Vault, Redis, secrets, broker API
	ScopeHost               // airlock host's: policy, plugins, evidence, control API, broker token
)

func (s Scope) serve() bool { return s == ScopeAll || s == ScopeServe }
func (s Scope) host() bool  { return s == ScopeAll || s == ScopeHost }

// CheckFiles is CheckFilesOf(ScopeAll).
func (c *Config) CheckFiles() error { return c.CheckFilesOf(ScopeAll) }

// CheckFilesOf checks every file and directory the config names for
// scope: that it exists, is of the right kind and can be read, that a
// file holding a secret is not readable by others, and that the file
// secret source is a map of path → field → string. It returns every
// problem at once; check-config runs it (the commands fail on the same
// files when they open them). No message names a path: each names its
// key.
func (c *Config) CheckFilesOf(scope Scope) error {
	var errs []error
	addErr := func(key, path string, err error) {
		errs = append(errs, scrub(key, path, err))
	}
	check := func(key, path string, dir, secret bool) bool {
		if path == "" {
			return false
		}
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s: the file does not exist", key))
			return false
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %v", key, errors.Unwrap(err)))
			return false
		case dir && !st.IsDir():
			errs = append(errs, fmt.Errorf("%s: not a directory", key))
			return false
		case !dir && !st.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("%s: not a regular file", key))
			return false
		case secret && st.Mode().Perm()&0o077 != 0:
			errs = append(errs, fmt.Errorf("%s: readable by others (mode %#o; chmod 600)", key, st.Mode().Perm()))
			return false
		}
		if dir {
			if _, err := os.ReadDir(path); err != nil {
				errs = append(errs, fmt.Errorf("%s: the directory cannot be read", key))
			}
			return false
		}
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the file cannot be read", key))
			return false
		}
		f.Close()
		return true
	}
	// Keys and tokens Airlock creates at first use: a missing one is
	// fine; one its group or others may read is refused (the commands
	// refuse it too when they load it).
	private := func(key, path string, gid int) {
		if path == "" {
			return
		}
		if err := peerauth.CheckPrivatePath(key, path, gid); err != nil {
			addErr(key, path, err)
		}
	}
	if scope.serve() {
		check("proxy.upstream_ca_file", c.Proxy.UpstreamCAFile, false, false)
		if check("broker.secrets.file", c.Broker.Secrets.File, false, true) {
			// Read as the broker reads it: a file of another shape passes
			// the checks above and then fails every request with 503.
			if err := (&broker.FileSource{Path: c.Broker.Secrets.File}).Reload(); err != nil {
				addErr("broker.secrets.file", c.Broker.Secrets.File, err)
			}
		}
		check("broker.store.redis.password_file", c.Broker.Store.Redis.PasswordFile, false, true)
		check("broker.store.redis.ca_file", c.Broker.Store.Redis.CAFile, false, false)
		check("vault.ca_file", c.Vault.CAFile, false, false)
		check("vault.auth.token_file", c.Vault.Auth.TokenFile, false, true)
		check("vault.auth.role_id_file", c.Vault.Auth.RoleIDFile, false, true)
		check("vault.auth.secret_id_file", c.Vault.Auth.SecretIDFile, false, true)
		if c.Tokens.Keys.Source == tokens.SourceFile {
			private("tokens.keys.path", c.Tokens.Keys.Path, peerauth.NoGroup)
		}
		private("proxy.intercept.ca_key_file", c.Proxy.Intercept.CAKeyFile, peerauth.NoGroup)
		if _, err := peerauth.LookupUIDs(c.Broker.API.AllowedUsers); err != nil {
			errs = append(errs, errors.New("broker.api.allowed_users: a user is not on this system"))
		}
	}
	if scope.host() {
		check("host.policy", c.Host.Policy, false, false)
		check("host.artifacts", c.Host.Artifacts, true, false)
		check("host.executa.sampling.fixture", c.Host.Executa.Sampling.Fixture, false, false)
		for i, p := range c.Host.Executa.Plugins {
			check(fmt.Sprintf("host.executa.plugins[%d].command", i), p.Command, false, false)
		}
		private("host.evidence_key", c.Host.EvidenceKey, peerauth.NoGroup)
		private("host.control_token_file", c.Host.ControlTokenFile, peerauth.NoGroup)
		if _, err := peerauth.LookupUIDs(c.Host.ControlAllowedUsers); err != nil {
			errs = append(errs, errors.New("host.control_allowed_users: a user is not on this system"))
		}
		checkControlPrincipals(c.Host.ControlPrincipals, check, addErr, func(err error) { errs = append(errs, err) })
		// A root host gives each plugin a uid of this range that no user
		// or group has; a range that holds some is the operator's to fix.
		if err := sandbox.CheckUIDRange("host.sandbox.uid_range", c.Host.Sandbox.UIDRange); err != nil {
			errs = append(errs, err)
		}
		if c.Host.Policy != "" {
			if _, err := policy.Load(c.Host.Policy); err != nil && !errors.Is(err, fs.ErrNotExist) {
				addErr("host.policy", c.Host.Policy, fmt.Errorf("host.policy: %w", err))
			}
		}
	}
	errs = append(errs, c.checkPlanted(scope)...)
	// Both: serve writes the broker token, the host reads it.
	if gid, err := peerauth.LookupGroup(c.Broker.API.Group); err != nil {
		errs = append(errs, errors.New("broker.api.group: no such group on this system"))
	} else {
		private("broker.api.token_file", c.Broker.API.TokenFile, gid)
	}
	return errors.Join(errs...)
}

// scrubbed is an error whose message no longer names a path of the
// config; errors.Is and As still see the original.
type scrubbed struct {
	msg string
	err error
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }

// scrub removes path from err's message (a helper's message may name the
// file it opened): the key names it.
func scrub(key, path string, err error) error {
	msg := err.Error()
	if path != "" {
		msg = strings.ReplaceAll(msg, path, "the file")
	}
	if !strings.HasPrefix(msg, key) {
		msg = key + ": " + msg
	}
	return scrubbed{msg: msg, err: err}
}
