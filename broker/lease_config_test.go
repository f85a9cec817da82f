package broker

import (
	"strings"
	"testing"
)

func TestLeaseConfigValidate(t *testing.T) {
	leased := Intent{Class: ClassWrite, Secret: SecretRef{Source: SourceVaultLease, Mount: "rabbitmq", Path: "creds/airlock", Field: "password"},
		Inject: Inject{Kind: &BasicInject{UsernameField: "username"}}}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "memory store needs no seal key"},
		{name: "redis store needs a seal key", mutate: func(c *Config) {
			c.Store = StoreConfig{Type: StoreRedis, Redis: RedisConfig{Address: "127.0.0.1:6379"}}
		}, wantErr: "broker.leases.seal_key_file: required"},
		{name: "redis store with a seal key", mutate: func(c *Config) {
			c.Store = StoreConfig{Type: StoreRedis, Redis: RedisConfig{Address: "127.0.0.1:6379"}}
			c.Leases.SealKeyFile = "/etc/airlock/lease-seal.key"
		}},
		{name: "mount required", mutate: func(c *Config) {
			in := c.Intents["mq"]
			in.Secret.Mount = ""
			c.Intents["mq"] = in
		}, wantErr: "secret.mount: required for vault_lease"},
		{name: "data only for vault_lease", mutate: func(c *Config) {
			c.Intents["kv"] = Intent{Class: ClassRead, Secret: SecretRef{Source: SourceVault, Path: "a", Field: "b", Data: map[string]string{"x": "y"}},
				Inject: Inject{Kind: &QueryInject{Name: "k"}}}
		}, wantErr: "secret.data: is for source vault_lease"},
		{name: "kv_version not for vault_lease", mutate: func(c *Config) {
			in := c.Intents["mq"]
			in.Secret.KVVersion = 2
			c.Intents["mq"] = in
		}, wantErr: "kv_version: is for source vault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Intents: map[string]Intent{"mq": leased}}
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			err := c.WithDefaults().Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}
