package tokens

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/internal/vault"
)

// vaultKeysField is the KV v2 field that holds the JSON key set.
const vaultKeysField = "keys"

// VaultSource stores keys in one Vault KV v2 secret, so that several
// replicas sign with the same keys and see each other's rotations. Writes
// use KV v2 check-and-set, so two replicas rotating at once converge.
//
// The secret holds private signing keys: the Vault policy should grant
// read and update on this one path to Airlock only.
type VaultSource struct {
	Client *vaultapi.Client
	Mount  string // KV v2 mount, e.g. "secret"
	Path   string // secret path within the mount
}

// Load implements KeySource.
func (v *VaultSource) Load(ctx context.Context) (KeySet, error) {
	s, err := v.Client.KVv2(v.Mount).Get(ctx, v.Path)
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return KeySet{}, nil
	}
	if err != nil {
		return KeySet{}, fmt.Errorf("read signing keys from Vault %s/%s: %w", v.Mount, v.Path, err)
	}
	raw, ok := s.Data[vaultKeysField].(string)
	if !ok {
		return KeySet{}, fmt.Errorf("signing keys in Vault secret %s/%s: field %q is missing or not a string", v.Mount, v.Path, vaultKeysField)
	}
	keys, err := unmarshalKeys([]byte(raw))
	if err != nil {
		return KeySet{}, fmt.Errorf("signing keys in Vault secret %s/%s: %w", v.Mount, v.Path, err)
	}
	version := ""
	if s.VersionMetadata != nil {
		version = strconv.Itoa(s.VersionMetadata.Version)
	}
	return KeySet{Keys: keys, Version: version}, nil
}

// Save implements KeySource.
func (v *VaultSource) Save(ctx context.Context, set KeySet) error {
	cas := 0
	if set.Version != "" {
		n, err := strconv.Atoi(set.Version)
		if err != nil {
			return fmt.Errorf("key set version %q is not a KV v2 version", set.Version)
		}
		cas = n
	}
	data, err := marshalKeys(set.Keys)
	if err != nil {
		return err
	}
	_, err = v.Client.KVv2(v.Mount).Put(ctx, v.Path,
		map[string]any{vaultKeysField: string(data)}, vaultapi.WithCheckAndSet(cas))
	if vault.IsCASConflict(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("write signing keys to Vault %s/%s: %w", v.Mount, v.Path, err)
	}
	return nil
}
