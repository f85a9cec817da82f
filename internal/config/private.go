package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/tokens"
)

// checkPlanted reports, for scope, what the commands refuse at start as
// something another local user could have planted or may change
// (fsutil.ErrPlanted): the state directory and the directories of the
// keys and tokens the process makes, another user's or writable by its
// group or others; the evidence log, APS store and lockfile when its
// group or others may write them. So check-config (a unit's
// ExecStartPre, an upgrade's first check) names every one at once, with
// its fix, instead of the process refusing them one start at a time.
// What does not exist yet is fine: Airlock makes it private.
func (c *Config) checkPlanted(scope Scope) []error {
	var errs []error
	seen := map[string]bool{} // the evidence key's directory is often state_dir
	dir := func(key, path string) {
		if path == "" || seen[filepath.Clean(path)] {
			return
		}
		seen[filepath.Clean(path)] = true
		if err := fsutil.CheckPrivateDir(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, scrubAs(key, path, "the directory", err))
		}
	}
	file := func(key, path string) {
		if path == "" {
			return
		}
		st, err := os.Lstat(path)
		switch {
		case err != nil:
			return // a missing one is made 0600; other errors show at open
		case st.Mode()&fs.ModeSymlink != 0 && key == "host.evidence":
			err = fmt.Errorf("%w: the file is a symbolic link (set host.evidence to the file itself)", fsutil.ErrPlanted)
		case st.Mode().IsRegular():
			err = fsutil.CheckOwnFile(path, st)
		}
		if err != nil {
			errs = append(errs, scrubAs(key, path, "the file", err))
		}
	}
	if scope.serve() {
		if c.Tokens.Keys.Source == tokens.SourceFile && c.Tokens.Keys.Path != "" {
			dir("tokens.keys.path's directory", filepath.Dir(c.Tokens.Keys.Path))
		}
		if c.Proxy.Intercept.CAKeyFile != "" {
			dir("proxy.intercept.ca_key_file's directory", filepath.Dir(c.Proxy.Intercept.CAKeyFile))
		}
		if c.Broker.API.TokenFile != "" {
			dir("broker.api.token_file's directory", filepath.Dir(c.Broker.API.TokenFile))
		}
	}
	if scope.host() {
		dir("state_dir", c.StateDir)
		if c.Host.EvidenceKey != "" {
			dir("host.evidence_key's directory", filepath.Dir(c.Host.EvidenceKey))
		}
		if c.Host.ControlTokenFile != "" {
			dir("host.control_token_file's directory", filepath.Dir(c.Host.ControlTokenFile))
		}
		file("host.evidence", c.Host.Evidence)
		file("host.lockfile", c.Host.Lockfile)
		file("host.executa.storage", c.Host.Executa.Storage)
	}
	return errs
}

// scrubAs is scrub naming path as what ("the directory").
func scrubAs(key, path, what string, err error) error {
	msg := err.Error()
	if errors.Is(err, syscall.EACCES) {
		msg = "permission denied"
	}
	msg = strings.ReplaceAll(msg, path, what)
	return scrubbed{msg: key + ": " + msg, err: err}
}
