package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// WrapInfo is what Vault says about a response-wrapping token without
// unwrapping it.
type WrapInfo struct {
	// CreationPath is the API path whose response it wraps
	// (auth/approle/role/NAME/secret-id for an AppRole secret id).
	CreationPath string
	// Expires is when the wrapping token stops working.
	Expires time.Time
}

// ErrNotSecretID: the wrapping token wraps something other than an
// AppRole secret id.
var ErrNotSecretID = errors.New("the wrapping token does not wrap an AppRole secret id")

// LookupWrappedSecretID checks the wrapping token in
// vault.auth.secret_id_file with sys/wrapping/lookup, which leaves it
// usable: a wrapping token is single-use, so a check that unwrapped it
// (or logged in with it) would leave airlock serve unable to log in.
func LookupWrappedSecretID(ctx context.Context, cfg Config) (WrapInfo, error) {
	b, err := os.ReadFile(cfg.Auth.SecretIDFile)
	if err != nil {
		return WrapInfo{}, fmt.Errorf("vault.auth.secret_id_file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return WrapInfo{}, errors.New("vault.auth.secret_id_file: file is empty")
	}
	api, err := NewAPIClient(cfg)
	if err != nil {
		return WrapInfo{}, err
	}
	s, err := api.Logical().WriteWithContext(ctx, "sys/wrapping/lookup", map[string]any{"token": tok})
	if err != nil {
		return WrapInfo{}, fmt.Errorf("vault: the wrapped secret id is not usable (used already, expired, or not a wrapping token): %w", redactVaultError(err))
	}
	if s == nil || s.Data == nil {
		return WrapInfo{}, errors.New("vault: sys/wrapping/lookup answered nothing")
	}
	var info WrapInfo
	info.CreationPath, _ = s.Data["creation_path"].(string)
	if !strings.HasPrefix(info.CreationPath, "auth/") || !strings.HasSuffix(info.CreationPath, "/secret-id") {
		return info, ErrNotSecretID
	}
	created, _ := s.Data["creation_time"].(string)
	t, err := time.Parse(time.RFC3339Nano, created)
	if err != nil {
		return info, errors.New("vault: sys/wrapping/lookup gave no creation time")
	}
	n, _ := s.Data["creation_ttl"].(json.Number)
	ttl, err := n.Int64()
	if err != nil {
		return info, errors.New("vault: sys/wrapping/lookup gave no ttl")
	}
	info.Expires = t.Add(time.Duration(ttl) * time.Second)
	return info, nil
}
