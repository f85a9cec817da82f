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
