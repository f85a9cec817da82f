package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/tokens"
)

func TestDefaultsValidate(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("embedded defaults invalid: %v", err)
	}
	if c.Tokens.Keys.Source != tokens.SourceFile || c.Tokens.Keys.Path != "/state/airlock/signing-keys.pem" {
		t.Fatalf("default key source = %+v", c.Tokens.Keys)
	}
	if c.Admin.Listen != DefaultAdminListen || c.Tokens.TTL != tokens.DefaultTTL {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestLoadFull(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Tokens.RotateEvery != 24*time.Hour || c.Tokens.Algorithm != tokens.ES256 || c.Vault.Namespace != "team-a" {
		t.Fatalf("decoded %+v", c)
	}
}

func TestUnknownKeysNamedWithLines(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "unknown-key.yaml"))
	if err == nil {
		t.Fatal("unknown keys accepted")
	}
	for _, want := range []string{"line 4: field listne not found", "line 7: field tll not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "many-problems.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{
		"version:", "log.format:", "log.level:", "admin.listen:", "tokens.algorithm:",
		"tokens.ttl:", "tokens.leeway:", "tokens.keys.source: vault needs the vault section",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestDecodeErrorsDoNotEchoValues(t *testing.T) {
	_, err := Parse([]byte("version: v1\ntokens:\n  ttl: hunter2-secret\n"))
	if err == nil {
		t.Fatal("bad duration accepted")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error echoes the value: %v", err)
	}
	if !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("error lacks the line: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"two documents", "version: v1\n---\nversion: v1\n", "more than one"},
		{"not YAML", "version: [v1\n", "invalid YAML"},
		{"scalar root", "hello\n", "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoadRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte("version: v1\n#"+strings.Repeat("x", MaxSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"full.yaml", "unknown-key.yaml", "many-problems.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("version: v1\ntokens: {ttl: 1s, keys: {source: file}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		_ = c.Validate() // must not panic
	})
}

// Every path of Airlock's own that a config names is hidden from plugins,
// the defaults under the state directory included.
func TestHidden(t *testing.T) {
	c := Default()
	c.Path = "/etc/airlock/airlock.yaml"
	c.Broker.Secrets.File = "/srv/secrets.yaml"
	c.Broker.API.TokenFile = "/run/airlock/broker.token"
	c.Proxy.Intercept.CAKeyFile = "/etc/airlock/ca.key"
	c.Host.Executa.Storage = "relative/aps.db"
	hidden := c.Hidden()
	for _, want := range []string{c.StateDir, "/etc/airlock/airlock.yaml", "/srv/secrets.yaml", "/run/airlock/broker.token",
		"/etc/airlock/ca.key", c.Host.EvidenceKey, c.Tokens.Keys.Path} {
		if !slices.Contains(hidden, want) {
			t.Errorf("%s is not hidden: %v", want, hidden)
		}
	}
	if slices.Contains(hidden, "relative/aps.db") || slices.Contains(hidden, "/") {
		t.Errorf("a relative path or / is in the list: %v", hidden)
	}
}
