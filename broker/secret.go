package broker

import (
	"context"
)

// SecretData is one secret as a source returned it: its string fields and
// its version (KV v2 version; 0 when the source has none).
type SecretData struct {
	Fields  map[string]string
	Version int
}

// SecretSource reads secrets. Errors wrap ErrSecretUnavailable,
// ErrSecretNotFound or ErrWrongKVVersion, and never carry a value.
type SecretSource interface {
	Read(ctx context.Context, ref SecretRef) (SecretData, error)
}

var (
	_ SecretSource = (*VaultSource)(nil)
	_ SecretSource = (*FileSource)(nil)
)

// Secret is what the proxy injects: the bound field's value, the user name
// for basic auth when it comes from the secret, and the version read.
type Secret struct {
	Value    string
	Username string
	Version  int
	// Fields are all the secret's fields (read-only), for the
	// processors that need more than one (access key id, client id).
	Fields map[string]string
	// Lease is the fingerprint of the lease the secret came with (source
	// vault_lease), for audit lines; empty for a static secret.
	Lease string
}
