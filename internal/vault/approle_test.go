package vault

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// bootstrap runs deploy/vault/bootstrap.sh against v and returns the
// directory holding role-id and the wrapped secret-id.
func bootstrap(t *testing.T, v *testenv.VaultServer, env ...string) string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "..", "deploy", "vault", "bootstrap.sh"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"VAULT_ADDR=" + v.Addr, "VAULT_TOKEN=" + v.RootToken, "VAULT_CLI=" + v.Bin, "OUT_DIR=" + out}, env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bootstrap.sh: %v\n%s", err, b)
	}
	for _, f := range []string{"role-id", "secret-id"} {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v", f, err, st.Mode().Perm())
		}
	}
	return out
}

func appRoleConfig(v *testenv.VaultServer, dir string) Config {
	return Config{Address: v.Addr, Auth: AuthConfig{Method: AuthAppRole,
		RoleIDFile: filepath.Join(dir, "role-id"), SecretIDFile: filepath.Join(dir, "secret-id"), SecretIDWrapped: true}}
}

// The bootstrap script prepares a real Vault; Airlock then logs in with
// AppRole, reads what the policy allows and nothing else.
func TestBootstrapThenAppRoleLogin(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	dir := bootstrap(t, v)
	// Idempotent: a second run succeeds too (and issues a new secret id).
	bootstrap(t, v)
	root := v.Client(t)
	if _, err := root.KVv2("secret").Put(ctx, "airlock/demo", map[string]any{"token": "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.KVv2("secret").Put(ctx, "other/demo", map[string]any{"token": "t"}); err != nil {
		t.Fatal(err)
	}

	c, err := Connect(ctx, appRoleConfig(v, dir), nil)
	if err != nil {
		t.Fatalf("AppRole login: %v", err)
	}
	if _, err := c.API.KVv2("secret").Get(ctx, "airlock/demo"); err != nil {
		t.Fatalf("read allowed by policy: %v", err)
	}
	_, err = c.API.KVv2("secret").Get(ctx, "other/demo")
	var re *vaultapi.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 403 {
		t.Fatalf("read outside the policy: %v, want 403", err)
	}
	if _, err := c.API.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/secret"); err != nil {
		t.Fatalf("KV version lookup allowed by policy: %v", err)
	}

	// The wrapping token is single-use: a second process cannot unwrap it.
	if _, err := Connect(ctx, appRoleConfig(v, dir), nil); err == nil || !strings.Contains(err.Error(), "single-use") || !strings.Contains(err.Error(), "bootstrap.sh") {
		t.Fatalf("second unwrap: %v", err)
	}
}

// The token is renewed while possible, obtained again past its max TTL,
// and after Vault revokes it.
func TestAppRoleTokenLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := testenv.NewVault(t)
	dir := bootstrap(t, v, "TOKEN_TTL=2s", "TOKEN_MAX_TTL=4s")
	root := v.Client(t)
	if _, err := root.KVv2("secret").Put(ctx, "airlock/demo", map[string]any{"token": "t"}); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, appRoleConfig(v, dir), slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Logins are dated by a clock the test moves: only ReauthQuiet reads
	// it, and Vault's own TTLs below run on Vault's (real) clock.
	clk := testenv.NewClock()
	c.now = clk.Now
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	read := func() error {
		_, err := c.API.KVv2("secret").Get(ctx, "airlock/demo")
		var re *vaultapi.ResponseError
		if errors.As(err, &re) && re.StatusCode == 403 {
			c.Reauth()
		}
		return err
	}
	eventually := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := read()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still failing: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Past the 4 s max TTL (Vault's clock, so real time) the token is
	// replaced; reads go on meanwhile, as a running host's would.
	first := c.API.Token()
	for deadline := time.Now().Add(30 * time.Second); c.API.Token() == first; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("token was not replaced after its max TTL")
		}
		_ = read()
	}
	eventually("past max TTL")

	// An admin revokes Airlock's token: the next read is refused, the
	// client logs in again, reads work again without a restart.
	clk.Advance(ReauthQuiet) // the last login is not recent
	cur := c.API.Token()
	logins := c.Logins()
	if err := root.Auth().Token().RevokeTreeWithContext(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// Many requests fail with the revoked token at once: one login.
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _ = read() }()
	}
	wg.Wait()
	eventually("after revocation")
	if c.API.Token() == cur {
		t.Fatal("token was not replaced after revocation")
	}
	// Every Reauth the burst sent has been handled once Run has taken two
	// more from the one-slot channel (it takes one only after handling
	// the one before); the clock has not moved, so none is a new login.
	c.reauth <- struct{}{}
	c.reauth <- struct{}{}
	if n := c.Logins() - logins; n != 1 {
		t.Fatalf("%d logins after one revocation, want 1", n)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Address: "vault:8200"}, "vault.address"},
		{Config{Address: "https://v", Auth: AuthConfig{Method: "ldap"}}, "vault.auth.method"},
		{Config{Address: "https://v", Auth: AuthConfig{Method: AuthAppRole}}, "exactly one of role_id"},
		{Config{Address: "https://v", Auth: AuthConfig{Method: AuthAppRole, RoleID: "r"}}, "secret_id_file"},
		{Config{Address: "https://v", Auth: AuthConfig{Method: AuthKubernetes}}, "vault.auth.role"},
		{Config{Address: "https://v", Auth: AuthConfig{RoleID: "r"}}, "need method approle"},
	} {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("unconfigured: %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
