package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/health"
	"github.com/airlock-dev/airlock/internal/vault"
)

// caState is the intercept CA as it is stored: the trust bundle (every CA
// certificate plugins trust, PEM; the signer is the one whose public key
// matches Key), the signing key, and during a rotation the staged next
// CA's key (its certificate already in the bundle).
type caState struct {
	Bundle  []byte
	Key     []byte
	NextKey []byte
	version string // the store's version, for check-and-set
}

func (st caState) empty() bool { return len(st.Bundle) == 0 && len(st.Key) == 0 }

// errCAConflict: another replica wrote the CA since it was read.
var errCAConflict = errors.New("the intercept CA was changed by someone else meanwhile")

// caStore keeps the intercept CA: two files, or one Vault KV v2 secret
// that replicas share.
type caStore interface {
	load(ctx context.Context) (caState, error) // the zero state when none exists yet
	save(ctx context.Context, st caState) error
	// publish is where plugins' hosts read the trust bundle from (the
	// bundle file), written by the proxy when the store is not a file.
	publish() string
	String() string
}

// fileCAStore keeps the bundle in ca_file and the keys in ca_key_file and
// ca_key_file.next, mode 0600. Each write is atomic; the signer is found
// by its key, so a crash between two writes leaves a usable CA. A new CA
// is written staged (see create), so a creation cut short by a crash or
// a full disk leaves no key without its certificate.
type fileCAStore struct{ cert, key string }

func (f fileCAStore) next() string    { return f.key + ".next" }
func (f fileCAStore) publish() string { return "" }
func (f fileCAStore) String() string  { return "the files " + f.cert + " and " + f.key }

func (f fileCAStore) load(context.Context) (caState, error) {
	var st caState
	if err := fsutil.CheckPrivateDir(filepath.Dir(f.key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return caState{}, fmt.Errorf("proxy.intercept.ca_key_file: %w", err)
	}
	for _, x := range []struct {
		path, name string
		dst        *[]byte
		secret     bool
	}{{f.cert, "ca_file", &st.Bundle, false}, {f.key, "ca_key_file", &st.Key, true}, {f.next(), "ca_key_file (.next)", &st.NextKey, true}} {
		fi, err := os.Stat(x.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return caState{}, fmt.Errorf("proxy.intercept.%s: %w", x.name, err)
		}
		if x.secret && fi.Mode().Perm()&0o077 != 0 {
			return caState{}, fmt.Errorf("proxy.intercept.%s: mode %04o lets others read the CA key; chmod 600 it", x.name, fi.Mode().Perm())
		}
		if *x.dst, err = os.ReadFile(x.path); err != nil {
			return caState{}, fmt.Errorf("proxy.intercept.%s: %w", x.name, err)
		}
	}
	if len(st.Key) == 0 && len(st.Bundle) > 0 && len(st.NextKey) > 0 && createdOnly(st) {
		// A creation cut short after its certificate: finish it.
		if err := os.Rename(f.next(), f.key); err != nil {
			return caState{}, fmt.Errorf("proxy.intercept.ca_key_file: %w", err)
		}
		st.Key, st.NextKey = st.NextKey, nil
	}
	if len(st.Key) == 0 && len(st.Bundle) > 0 {
		return caState{}, errors.New("proxy.intercept: ca_file exists without ca_key_file; restore the key or remove both to create a new CA")
	}
	if len(st.Bundle) == 0 && len(st.Key) > 0 {
		return caState{}, errors.New("proxy.intercept: ca_key_file exists without ca_file; restore the certificate or remove both to create a new CA")
	}
	return st, nil
}

// save writes the staged key first, then the signing key, then the
// bundle, and removes a staged key that is no longer staged.
func (f fileCAStore) save(_ context.Context, st caState) error {
	for _, p := range []string{f.cert, f.key} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
	}
	// A CA key in a directory another user may write to, or made, would
	// be theirs to read (root gives a new file to its directory's owner).
	if err := fsutil.CheckPrivateDir(filepath.Dir(f.key)); err != nil {
		return fmt.Errorf("proxy.intercept.ca_key_file: %w", err)
	}
	if f.absent() {
		return f.create(st)
	}
	if len(st.NextKey) > 0 {
		if err := fsutil.WriteFile(f.next(), st.NextKey, 0o600); err != nil {
			return err
		}
	}
	if err := fsutil.WriteFile(f.key, st.Key, 0o600); err != nil {
		return err
	}
	if err := fsutil.WriteFile(f.cert, st.Bundle, 0o644); err != nil {
		return err
	}
	if len(st.NextKey) == 0 {
		if err := os.Remove(f.next()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// absent: neither the bundle nor the key is there (a CA is created).
func (f fileCAStore) absent() bool {
	_, errCert := os.Lstat(f.cert)
	_, errKey := os.Lstat(f.key)
	return errors.Is(errCert, fs.ErrNotExist) && errors.Is(errKey, fs.ErrNotExist)
}

// create writes a new CA: its key staged (ca_key_file.next), then the
// bundle, then the key moved to its place. A creation cut short leaves
// either no bundle (the CA is created again at the next start; a staged
// key alone is not a CA) or the bundle beside its staged key, which load
// completes; one that fails (a full disk) removes the staged key.
func (f fileCAStore) create(st caState) error {
	if err := fsutil.WriteFile(f.next(), st.Key, 0o600); err != nil {
		return err
	}
	if err := fsutil.WriteFile(f.cert, st.Bundle, 0o644); err != nil {
		_ = os.Remove(f.next())
		return err
	}
	return os.Rename(f.next(), f.key)
}

// createdOnly says whether st, a bundle with no signing key, is what a
// creation cut short leaves: the bundle holds one certificate, and it is
// the staged key's.
func createdOnly(st caState) bool {
	certs, err := parseCerts(st.Bundle)
	if err != nil || len(certs) != 1 {
		return false
	}
	key, err := parseKey(st.NextKey)
	return err == nil && certFor(certs, key) != nil
}

// Fields of the Vault KV v2 secret that holds the intercept CA.
const (
	vaultCABundle  = "certificates"
	vaultCAKey     = "private_key"
	vaultCANextKey = "next_private_key"
)

// vaultCAStore keeps the CA in one KV v2 secret, written with
// check-and-set, so replicas starting at once converge on one CA and a
// rotation is seen by all. The bundle is published to ca_file.
type vaultCAStore struct {
	client      *vaultapi.Client
	mount, path string
	bundleFile  string
}

func (v vaultCAStore) publish() string { return v.bundleFile }
func (v vaultCAStore) String() string  { return "the Vault secret " + v.mount + "/" + v.path }

func (v vaultCAStore) load(ctx context.Context) (caState, error) {
	s, err := v.client.KVv2(v.mount).Get(ctx, v.path)
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return caState{}, nil
	}
	if err != nil {
		return caState{}, fmt.Errorf("reading the intercept CA from %s: %w", v, err)
	}
	field := func(name string) []byte { s, _ := s.Data[name].(string); return []byte(s) }
	st := caState{Bundle: field(vaultCABundle), Key: field(vaultCAKey), NextKey: field(vaultCANextKey)}
	if s.VersionMetadata != nil {
		st.version = strconv.Itoa(s.VersionMetadata.Version)
	}
	if len(st.Bundle) == 0 || len(st.Key) == 0 {
		return caState{}, fmt.Errorf("the intercept CA in %s: fields %q and %q are required", v, vaultCABundle, vaultCAKey)
	}
	return st, nil
}

func (v vaultCAStore) save(ctx context.Context, st caState) error {
	cas := 0
	if st.version != "" {
		cas, _ = strconv.Atoi(st.version)
	}
	data := map[string]any{vaultCABundle: string(st.Bundle), vaultCAKey: string(st.Key)}
	if len(st.NextKey) > 0 {
		data[vaultCANextKey] = string(st.NextKey)
	}
	_, err := v.client.KVv2(v.mount).Put(ctx, v.path, data, vaultapi.WithCheckAndSet(cas))
	if vault.IsCASConflict(err) {
		return errCAConflict
	}
	if err != nil {
		return fmt.Errorf("writing the intercept CA to %s: %w", v, err)
	}
	return nil
}

// newCAStore is the store cfg names; vc is needed for Vault.
func newCAStore(cfg InterceptConfig, vc *vaultapi.Client) (caStore, error) {
	if cfg.Vault.Path == "" {
		return fileCAStore{cert: cfg.CAFile, key: cfg.CAKeyFile}, nil
	}
	if vc == nil {
		return nil, errors.New("proxy.intercept.vault needs the vault section")
	}
	return vaultCAStore{client: vc, mount: cfg.Vault.Mount, path: cfg.Vault.Path, bundleFile: cfg.CAFile}, nil
}

// reloadCA rereads the CA and, when it changed (a rotation by the CLI or
// another replica), signs with the new one from now on and republishes
// the bundle. A failed read keeps the CA in use, and is recorded
// (CAReload): the process is not ready until a reread succeeds.
func (s *Server) reloadCA(ctx context.Context) {
	if s.ca.Load() == nil {
		// Not loaded at start (Vault down): load it, or create it when
		// the store holds none, as New would have. The intercept_ca
		// readiness check reports this state; it is not a failed reread.
		ca, err := openCA(ctx, s.caStore, s.cfg.Intercept.PermittedDomains)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("proxy: the intercept CA still cannot be loaded; CONNECT stays refused", "error", err.Error())
			}
			return
		}
		s.ca.Store(ca)
		s.log.Info("proxy: intercept CA loaded", "signer", ca.cert.Subject.CommonName)
		return
	}
	err := s.rereadCA(ctx)
	if ctx.Err() != nil {
		return
	}
	s.caReload.Record(err)
}

func (s *Server) rereadCA(ctx context.Context) error {
	cur := s.ca.Load()
	st, err := s.caStore.load(ctx)
	if err != nil {
		s.log.Warn("proxy: rereading the intercept CA failed; the loaded one stays in use", "error", err.Error())
		return err
	}
	if st.empty() {
		return nil
	}
	if bytes.Equal(st.Bundle, cur.state.Bundle) && bytes.Equal(st.Key, cur.state.Key) && bytes.Equal(st.NextKey, cur.state.NextKey) {
		return nil
	}
	ca, err := openCA(ctx, s.caStore, s.cfg.Intercept.PermittedDomains)
	if err != nil {
		s.log.Warn("proxy: the changed intercept CA is not usable; the loaded one stays in use", "error", err.Error())
		return err
	}
	s.ca.Store(ca)
	s.log.Info("proxy: intercept CA reloaded", "signer", ca.cert.Subject.CommonName, "staged_next", ca.next != nil)
	return nil
}

// CAReload is the state of the intercept CA's periodic reread: its error
// while the CA cannot be read or is not usable, and a count of failures.
func (s *Server) CAReload() *health.Reload { return &s.caReload }
