package config

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// Without a home the state is in the temp directory under a name of the
// user's own: two users without one do not share it (and one made by
// another user first is refused when used: fsutil.CheckPrivateDir).
func TestDefaultStateDirWithoutAHome(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if got, want := Default().StateDir, filepath.Join(tmp, "airlock-state-"+strconv.Itoa(os.Geteuid())); got != want {
		t.Fatalf("state_dir = %s, want %s", got, want)
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
	for _, name := range []string{"full.yaml", "unknown-key.yaml", "many-problems.yaml", "map-problems.yaml"} {
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
	hidden := c.Hidden()
	for _, want := range []string{c.StateDir, "/etc/airlock/airlock.yaml", "/srv/secrets.yaml", "/run/airlock/broker.token",
		"/etc/airlock/ca.key", c.Host.EvidenceKey, c.Tokens.Keys.Path} {
		if !slices.Contains(hidden, want) {
			t.Errorf("%s is not hidden: %v", want, hidden)
		}
	}
	if slices.Contains(hidden, "/") {
		t.Errorf("/ is in the list: %v", hidden)
	}
}

// Problems in map-keyed sections come out in one order, every run: a
// check-config whose output reshuffles between runs cannot be diffed or
// asserted on.
func TestValidateOrderIsStable(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "map-problems.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	first := c.Validate()
	if first == nil {
		t.Fatal("invalid config accepted")
	}
	// Go randomises map order per range loop: 64 runs of five resolve
	// entries, six timeouts and two sigv4 fields all matching by chance is
	// out of reach.
	for range 64 {
		if err := c.Validate(); err.Error() != first.Error() {
			t.Fatalf("Validate output changed between runs:\n%v\n---\n%v", first, err)
		}
	}
	var got []string
	for _, line := range strings.Split(first.Error(), "\n") {
		if strings.HasPrefix(line, "proxy.resolve") || strings.Contains(line, "timeout:") || strings.Contains(line, ".aws_sigv4.") {
			got = append(got, line)
		}
	}
	want := []string{
		"broker.intents.signed.inject.aws_sigv4.region: must be a plain name",
		"broker.intents.signed.inject.aws_sigv4.service: must be a plain name",
		"proxy.resolve.a.example.test[0]: not an IP address",
		"proxy.resolve.b.example.test[0]: not an IP address",
		"proxy.resolve: each entry needs a host name and at least one address",
		"proxy.resolve.d.example.test[0]: not an IP address",
		"proxy.resolve.e.example.test[1]: not an IP address",
		"proxy.limits.read_header_timeout: must not be negative",
		"proxy.limits.idle_timeout: must not be negative",
		"proxy.upstream.dial_timeout: must not be negative",
		"proxy.upstream.tls_handshake_timeout: must not be negative",
		"proxy.upstream.response_header_timeout: must not be negative",
		"proxy.upstream.idle_conn_timeout: must not be negative",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems in this order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
