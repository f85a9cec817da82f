package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/vault"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

// serve started while Vault is down — AppRole login, signing keys and
// secrets all in Vault — comes up not ready, naming vault and
// signing_key, and becomes ready once a Vault that was never up before
// starts, without a restart; then it serves the key and the secret.
func TestServeStartsWhileVaultIsDown(t *testing.T) {
	v := testenv.NewVault(t)
	v.Stop()
	dir := t.TempDir()
	roleIDFile, secretIDFile := filepath.Join(dir, "role-id"), filepath.Join(dir, "secret-id")
	const roleID, secretID = "serve-outage-role", "serve-outage-secret-id-5d1c"
	if err := os.WriteFile(roleIDFile, []byte(roleID+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretIDFile, []byte(secretID+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Vault.Address = v.Addr
	cfg.Vault.Auth = vault.AuthConfig{Method: vault.AuthAppRole, RoleIDFile: roleIDFile, SecretIDFile: secretIDFile}
	cfg.Tokens.Keys = tokens.KeysConfig{Source: tokens.SourceVault, Mount: "secret", Path: "airlock/outage-signing-keys"}
	cfg.Broker.Intents = map[string]broker.Intent{"outage.read": {Class: broker.ClassRead,
		Secret: broker.SecretRef{Source: broker.SourceVault, Mount: "secret", Path: "airlock/outage", Field: "token"},
		Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}}
	cfg.Broker = cfg.Broker.WithDefaults()
	cfg.Proxy.Intercept.CAFile = filepath.Join(dir, "intercept-ca.pem")
	cfg.Proxy.Intercept.Vault = proxy.InterceptVault{Mount: "secret", Path: "airlock/outage-intercept-ca"}
	cfg.Proxy.Intercept.Reload = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	ready := make(chan Ready, 1)
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(sctx, cfg, Options{Log: slog.New(slog.NewTextHandler(logs, nil)), OnReady: func(r Ready) { ready <- r }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Serve with Vault down: %v\n%s", err, logs.String())
	}
	code, body := readyz(t, r.Admin)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"vault"`) || !strings.Contains(body, `"signing_key"`) ||
		!strings.Contains(body, `"intercept_ca"`) {
		t.Fatalf("/readyz with Vault down: %d %s", code, body)
	}

	v.Start(t)
	ctx := context.Background()
	root := v.Client(t)
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, "approle", &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "airlock-serve", `path "secret/*" { capabilities = ["create", "read", "update", "list"] }`); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		path string
		data map[string]any
	}{
		{"auth/approle/role/serve", map[string]any{"token_policies": "airlock-serve", "token_ttl": "10m"}},
		{"auth/approle/role/serve/role-id", map[string]any{"role_id": roleID}},
		{"auth/approle/role/serve/custom-secret-id", map[string]any{"secret_id": secretID}},
	} {
		if _, err := root.Logical().WriteWithContext(ctx, w.path, w.data); err != nil {
			t.Fatalf("%s: %v", w.path, err)
		}
	}
	if _, err := root.KVv2("secret").Put(ctx, "airlock/outage", map[string]any{"token": "outage-secret-value"}); err != nil {
		t.Fatal(err)
	}
	// The login backs off up to a minute while Vault is down; on a
	// loaded machine Vault's own start takes a while.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		code, body := readyz(t, r.Admin)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after Vault came up: %d %s\n%s", code, body, logs.String())
		}
	}

	resp, err := client.Get("http://" + r.Admin + tokens.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jwks tokens.JWKS
	if err := json.NewDecoder(resp.Body).Decode(&jwks); err != nil || len(jwks.Keys) != 1 {
		t.Fatalf("JWKS once ready: %+v %v", jwks, err)
	}
	for _, p := range []string{"airlock/outage-signing-keys", "airlock/outage-intercept-ca"} {
		if _, err := root.KVv2("secret").Get(ctx, p); err != nil {
			t.Fatalf("what serve created is not in Vault at %s: %v", p, err)
		}
	}
	if _, err := os.Stat(cfg.Proxy.Intercept.CAFile); err != nil {
		t.Fatalf("the intercept CA bundle is not published: %v", err)
	}
}

// serve started while Redis is down comes up not ready, naming
// handle_store, and becomes ready when Redis starts, without a restart.
func TestServeStartsWhileRedisIsDown(t *testing.T) {
	rd := testenv.Redis(t)
	rd.Stop()
	cfg := testConfig(t)
	cfg.Broker.Store.Type = broker.StoreRedis
	cfg.Broker.Store.Redis.Address = rd.Addr
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := serveForTest(t, cfg)
	if code, body := readyz(t, r.Admin); code != http.StatusServiceUnavailable || !strings.Contains(body, `"handle_store"`) {
		t.Fatalf("/readyz with Redis down: %d %s", code, body)
	}
	if err := rd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, r.Admin, http.StatusOK, "", "Redis up after serve started")
	bc, err := brokerapi.Dial("unix://"+cfg.Broker.API.Socket, brokerapi.DialOptions{TokenFile: cfg.Broker.API.TokenFile})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if _, err := bc.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
}
