package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	vaultapi "github.com/hashicorp/vault/api"
)

// VaultSource reads KV v2 (or v1) secrets from Vault or OpenBao. Before
// the first read of a mount it asks Vault which KV version the mount is
// (as the vault CLI does), so a binding with the wrong kv_version fails
// with ErrWrongKVVersion instead of a puzzling "not found".
type VaultSource struct {
	Client *vaultapi.Client
	// OnAuthError is called when Vault refuses the token (403), so the
	// auth manager can log in again; may be nil.
	OnAuthError func()

	mu       sync.Mutex
	versions map[string]int // mount -> KV version; 0 = could not tell
}

// Read implements SecretSource.
func (v *VaultSource) Read(ctx context.Context, ref SecretRef) (SecretData, error) {
	if err := v.checkVersion(ctx, ref); err != nil {
		return SecretData{}, err
	}
	var s *vaultapi.KVSecret
	var err error
	if ref.KVVersion == 1 {
		s, err = v.Client.KVv1(ref.Mount).Get(ctx, ref.Path)
	} else {
		s, err = v.Client.KVv2(ref.Mount).Get(ctx, ref.Path)
	}
	if err != nil {
		return SecretData{}, v.classify(err)
	}
	out := SecretData{Fields: make(map[string]string, len(s.Data))}
	for k, val := range s.Data {
		if str, ok := val.(string); ok {
			out.Fields[k] = str
		}
	}
	if s.VersionMetadata != nil {
		out.Version = s.VersionMetadata.Version
	}
	return out, nil
}

func (v *VaultSource) checkVersion(ctx context.Context, ref SecretRef) error {
	v.mu.Lock()
	got, known := v.versions[ref.Mount]
	v.mu.Unlock()
	if !known {
		got = v.mountVersion(ctx, ref.Mount)
		if got < 0 {
			return fmt.Errorf("%w: Vault did not answer the mount lookup", ErrSecretUnavailable)
		}
		v.mu.Lock()
		if v.versions == nil {
			v.versions = map[string]int{}
		}
		v.versions[ref.Mount] = got
		v.mu.Unlock()
	}
	if got != 0 && got != ref.KVVersion {
		return fmt.Errorf("%w: mount is KV v%d, binding says v%d", ErrWrongKVVersion, got, ref.KVVersion)
	}
	return nil
}

// mountVersion returns the mount's KV version, 0 when Vault will not say
// (no permission on the lookup, not a KV mount), -1 when it is unreachable.
func (v *VaultSource) mountVersion(ctx context.Context, mount string) int {
	s, err := v.Client.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/"+mount)
	if err != nil {
		var re *vaultapi.ResponseError
		if errors.As(err, &re) && re.StatusCode < 500 {
			return 0
		}
		return -1
	}
	if s == nil || s.Data == nil {
		return 0
	}
	if t, _ := s.Data["type"].(string); t != "kv" && t != "generic" {
		return 0
	}
	opts, _ := s.Data["options"].(map[string]any)
	if ver, _ := opts["version"].(string); ver == "2" {
		return 2
	}
	return 1
}

func (v *VaultSource) classify(err error) error {
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return ErrSecretNotFound
	}
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusNotFound:
			return ErrSecretNotFound
		case http.StatusForbidden:
			if v.OnAuthError != nil {
				v.OnAuthError()
			}
			return fmt.Errorf("%w: Vault refused the token (403)", ErrSecretUnavailable)
		case http.StatusServiceUnavailable:
			return fmt.Errorf("%w: Vault is sealed or in standby (503)", ErrSecretUnavailable)
		}
		return fmt.Errorf("%w: Vault answered %d", ErrSecretUnavailable, re.StatusCode)
	}
	return fmt.Errorf("%w: %v", ErrSecretUnavailable, VaultTransportError(err))
}

// VaultTransportError names the kind of a failure to reach Vault (timed
// out, canceled, unreachable) without echoing anything Vault sent back.
func VaultTransportError(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "request timed out"
	case errors.Is(err, context.Canceled):
		return "request canceled"
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return "request timed out"
	}
	return "Vault is unreachable"
}
