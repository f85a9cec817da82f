package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/vault"
)

// check-config --vault with a wrapped AppRole secret id (what
// deploy/vault/bootstrap.sh writes) looks the wrapping token up and
// leaves it: run twice, it passes twice, and serve's login afterwards
// still unwraps it.
func TestCheckConfigVaultKeepsWrappedSecretID(t *testing.T) {
	v := testenv.NewVault(t)
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "..", "deploy", "vault", "bootstrap.sh"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "VAULT_ADDR=" + v.Addr,
		"VAULT_TOKEN=" + v.RootToken, "VAULT_CLI=" + v.Bin, "OUT_DIR=" + out, "OWNER="}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bootstrap.sh: %v\n%s", err, b)
	}
	vc := vault.Config{Address: v.Addr, Auth: vault.AuthConfig{Method: vault.AuthAppRole,
		RoleIDFile: filepath.Join(out, "role-id"), SecretIDFile: filepath.Join(out, "secret-id"), SecretIDWrapped: true}}
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
vault:
  address: %q
  auth: {method: approle, role_id_file: %q, secret_id_file: %q, secret_id_wrapped: true}
`, v.Addr, vc.Auth.RoleIDFile, vc.Auth.SecretIDFile))
	for range 2 {
		stdout, stderr, code := cli(t, nil, "", "check-config", "--vault", cfg)
		if code != 0 || !strings.Contains(stdout, "looked up, not unwrapped") {
			t.Fatalf("check-config --vault: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	if _, err := vault.Connect(context.Background(), vc, nil); err != nil {
		t.Fatalf("serve's login after check-config: %v", err)
	}
	// Used up now: check-config says so (and does not pass).
	if stdout, stderr, code := cli(t, nil, "", "check-config", "--vault", cfg); code != 1 || !strings.Contains(stderr, "vault.auth.secret_id_file") {
		t.Fatalf("check-config --vault with a used wrapping token: exit %d\n%s%s", code, stdout, stderr)
	}
}
