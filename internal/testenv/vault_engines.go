//go:build linux

package testenv

import (
	"context"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// MountPKI mounts a PKI secrets engine at mount with a generated root CA
// and a role "leaf" that issues any name with a lease (generate_lease), so
// each issued certificate can be revoked with its lease. It returns the
// CA certificate (PEM).
func (v *VaultServer) MountPKI(tb testing.TB, mount string) string {
	tb.Helper()
	c := v.Client(tb)
	ctx := context.Background()
	if err := c.Sys().MountWithContext(ctx, mount, &vaultapi.MountInput{Type: "pki",
		Config: vaultapi.MountConfigInput{MaxLeaseTTL: "87600h"}}); err != nil {
		tb.Fatalf("mount pki: %v", err)
	}
	s, err := c.Logical().WriteWithContext(ctx, mount+"/root/generate/internal",
		map[string]any{"common_name": "airlock test root", "ttl": "87600h", "key_type": "ec", "key_bits": 256})
	if err != nil {
		tb.Fatalf("pki root: %v", err)
	}
	ca, _ := s.Data["certificate"].(string)
	if _, err := c.Logical().WriteWithContext(ctx, mount+"/roles/leaf", map[string]any{
		"allow_any_name": true, "enforce_hostnames": false, "generate_lease": true, "no_store": false,
		"key_type": "ec", "key_bits": 256, "ttl": "1h", "max_ttl": "24h", "client_flag": true, "server_flag": true,
	}); err != nil {
		tb.Fatalf("pki role: %v", err)
	}
	return ca
}

// Leases lists the lease ids Vault holds under prefix (a mount and path,
// such as "pki/issue/leaf"), for tests that check a revocation.
func (v *VaultServer) Leases(tb testing.TB, prefix string) []string {
	tb.Helper()
	s, err := v.Client(tb).Logical().ListWithContext(context.Background(), "sys/leases/lookup/"+prefix)
	if err != nil {
		tb.Fatalf("list leases: %v", err)
	}
	if s == nil {
		return nil
	}
	keys, _ := s.Data["keys"].([]any)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if s, ok := k.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// MountRabbitMQ mounts Vault's RabbitMQ secrets engine at mount, connected
// to r as its administrator, with a role "plugin" whose users may use the
// management API (tag management) and every queue of the default vhost,
// and leases of ttl.
func (v *VaultServer) MountRabbitMQ(tb testing.TB, mount string, r *RabbitMQServer, ttl time.Duration) {
	tb.Helper()
	c := v.Client(tb)
	ctx := context.Background()
	if err := c.Sys().MountWithContext(ctx, mount, &vaultapi.MountInput{Type: "rabbitmq"}); err != nil {
		tb.Fatalf("mount rabbitmq: %v", err)
	}
	steps := []struct {
		path string
		data map[string]any
	}{
		{mount + "/config/connection", map[string]any{"connection_uri": r.APIURL, "username": r.Admin,
			"password": r.AdminPassword, "verify_connection": true}},
		{mount + "/config/lease", map[string]any{"ttl": int(ttl.Seconds()), "max_ttl": 86400}},
		{mount + "/roles/plugin", map[string]any{"tags": "management",
			"vhosts": `{"/": {"configure": ".*", "write": ".*", "read": ".*"}}`}},
	}
	for _, s := range steps {
		if _, err := c.Logical().WriteWithContext(ctx, s.path, s.data); err != nil {
			tb.Fatalf("vault write %s: %v", s.path, err)
		}
	}
}
