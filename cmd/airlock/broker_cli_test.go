package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestCheckConfigVault(t *testing.T) {
	v := testenv.Vault(t)
	if _, err := v.Client(t).KVv2("secret").Put(context.Background(), "cli/github", map[string]any{"token": "ghp-secret-value"}); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
vault: {address: %q}
broker:
  intents:
    github.read:
      class: read
      secret: {source: vault, path: cli/github, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: [https://api.github.com/]
    github.broken:
      class: write
      secret: {source: vault, path: cli/github, field: missing_field}
      inject: {query: {name: access_token}}
`, v.Addr))
	env := []string{"VAULT_TOKEN=" + v.RootToken}
	out, stderr, code := cli(t, env, "", "check-config", "--vault", cfg)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (one intent broken)\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"intent github.read: readable (vault, version 1)",
		`intent github.broken: FAILED: intent "github.broken": secret lacks the bound field`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, "ghp-secret-value") || strings.Contains(out+stderr, v.RootToken) {
		t.Fatal("check-config printed a secret")
	}
}

func TestSecretsRefreshEndpoint(t *testing.T) {
	admin := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("version: v1\nadmin: {listen: %q}\n", admin))
	startServe(t, nil, cfg, admin)
	post := func() int {
		resp, err := http.Post("http://"+admin+"/v1/secrets/refresh", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(); c != http.StatusOK {
		t.Fatalf("refresh = %d", c)
	}
	if c := post(); c != http.StatusTooManyRequests {
		t.Fatalf("second refresh within a second = %d, want 429", c)
	}
	resp, err := http.Get("http://" + admin + "/v1/secrets/refresh")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET refresh = %d, want 405", resp.StatusCode)
	}
}
