package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
)

// A file secret source that is not a map of path → field → string is
// refused by check-config, instead of passing and then failing every
// request with 503; the error never quotes the file's content.
func TestCheckFilesSecretsFileShape(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		wantErr    error
	}{
		{name: "map of path to field to string", body: "demo/api: {token: s3cr3t-a, user: bob}\nother: {k: v}\n"},
		{name: "number field is read as a string", body: "demo/api: {port: 8443}\n"},
		{name: "path maps to a string", body: "demo/api: s3cr3t-b\n", wantErr: broker.ErrSecretUnavailable},
		{name: "field maps to a list", body: "demo/api: {token: [s3cr3t-c]}\n", wantErr: broker.ErrSecretUnavailable},
		{name: "field maps to a map", body: "demo/api: {token: {inner: s3cr3t-d}}\n", wantErr: broker.ErrSecretUnavailable},
		{name: "top level is a list", body: "- s3cr3t-e\n", wantErr: broker.ErrSecretUnavailable},
		{name: "empty file", body: "", wantErr: broker.ErrSecretUnavailable},
		{name: "not YAML", body: "demo/api: {token: \"s3cr3t-f\n", wantErr: broker.ErrSecretUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secrets.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			c := Default()
			c.Broker.Secrets.File = path
			err := c.CheckFiles()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("CheckFiles = %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "broker.secrets.file") {
				t.Errorf("error does not name the key: %v", err)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error quotes the file's content: %v", err)
			}
		})
	}
}

// A secrets file others can read is reported once, as such (not again as
// unreadable by the broker).
func TestCheckFilesSecretsFileOpenMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(path, []byte("demo/api: {token: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.Broker.Secrets.File = path
	err := c.CheckFiles()
	if err == nil || !strings.Contains(err.Error(), "readable by others") || errors.Is(err, broker.ErrSecretUnavailable) {
		t.Fatalf("CheckFiles = %v", err)
	}
}

// What airlock host and serve refuse at start as planted or changeable by
// another local user (a state directory its group may write, an evidence
// log or lockfile copied in 0664, a key directory anyone may write to),
// check-config reports all at once, each under its key with its fix and
// no path — so an upgrade's first check, or a unit's ExecStartPre, names
// them before the start that would refuse the first of them.
func TestCheckFilesReportsWhatStartRefusesAsPlanted(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	keys := filepath.Join(t.TempDir(), "keys")
	for _, d := range []string{state, keys} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Parse([]byte("version: v1\nstate_dir: " + state + "\ntokens: {keys: {source: file, path: " + filepath.Join(keys, "signing-keys.pem") + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckFiles(); err != nil {
		t.Fatalf("Airlock's own private layout: %v", err)
	}
	for _, f := range []string{c.Host.Evidence, c.Host.Lockfile} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o664); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(state, os.ModeSetgid|0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keys, 0o777); err != nil {
		t.Fatal(err)
	}
	err = c.CheckFilesOf(ScopeHost)
	for _, want := range []string{
		"state_dir: refused: another local user could have put it there or may change it: the directory may be written by its group or others (mode 02775): chmod go-w it",
		"host.evidence: refused: another local user could have put it there or may change it: the file may be written by its group or others (mode 0664): chmod 600 it",
		"host.lockfile: refused: another local user could have put it there or may change it: the file may be written by its group or others (mode 0664): chmod 600 it",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckFilesOf(host) does not say %q:\n%v", want, err)
		}
	}
	if err != nil && (strings.Contains(err.Error(), state) || strings.Contains(err.Error(), "tokens.keys")) {
		t.Errorf("a path, or serve's keys in the host's check:\n%v", err)
	}
	if err := c.CheckFilesOf(ScopeServe); err == nil || !strings.Contains(err.Error(), "tokens.keys.path's directory: refused:") || strings.Contains(err.Error(), "state_dir") {
		t.Errorf("CheckFilesOf(serve): %v", err)
	}
}
