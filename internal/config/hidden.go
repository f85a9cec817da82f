package config

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/tokens"
)

// Hidden lists every path of Airlock's own a plugin must never see: the
// state directory, the config file, keys, secrets, credentials files,
// sockets' directories, evidence and storage. The sandbox hides each
// even where an operator's read-only grant covers it.
func (c *Config) Hidden() []string {
	paths := []string{c.StateDir, c.Path, c.Broker.Secrets.File, c.Broker.Store.Redis.PasswordFile,
		c.Proxy.Intercept.CAKeyFile, c.Vault.Auth.TokenFile, c.Vault.Auth.RoleIDFile, c.Vault.Auth.SecretIDFile,
		c.Vault.Auth.ServiceAccountTokenFile, c.Host.Lockfile, c.Host.Evidence, c.Host.EvidenceKey, c.Host.Policy,
		c.Host.Executa.Storage, c.Host.Executa.FilesDir, dirOf(c.Broker.API.Socket), unixDir(c.Host.Control),
		unixDir(c.Host.Broker), c.Broker.API.TCP.KeyFile, c.Broker.API.TokenFile, c.Host.ControlTokenFile}
	if t := c.Host.ControlTLS; t != nil {
		paths = append(paths, t.KeyFile)
	}
	if c.Broker.Store.Redis.Sentinel != nil {
		paths = append(paths, c.Broker.Store.Redis.Sentinel.PasswordFile)
	}
	if c.Tokens.Keys.Source == tokens.SourceFile {
		paths = append(paths, c.Tokens.Keys.Path)
	}
	var out []string
	for _, p := range paths {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if p != "/" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func dirOf(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Dir(p)
}

func unixDir(addr string) string {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return filepath.Dir(p)
	}
	return ""
}
