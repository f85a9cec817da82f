package proxy

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// The CA is created once with its key private, and read back unchanged
// (a restart or a second replica sharing the files uses the same CA); it
// is limited to DNS names; a key others can read is refused.
func TestInterceptCAFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := fileCAStore{cert: filepath.Join(dir, "ca.pem"), key: filepath.Join(dir, "ca.key")}
	a, err := openCA(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(store.key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode().Perm(), err)
	}
	b, err := openCA(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !a.cert.Equal(b.cert) {
		t.Fatal("a second load made a new CA")
	}
	if len(b.cert.ExcludedIPRanges) != 2 || !b.cert.MaxPathLenZero {
		t.Fatalf("CA constraints: excluded IPs %v, max path len zero %v", b.cert.ExcludedIPRanges, b.cert.MaxPathLenZero)
	}
	leaf, err := b.leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf.Leaf.DNSNames; len(got) != 1 || got[0] != "api.example.com" || leaf.Leaf.NotAfter.Sub(leaf.Leaf.NotBefore) > 2*time.Hour {
		t.Fatalf("leaf names %v, validity %v", got, leaf.Leaf.NotAfter.Sub(leaf.Leaf.NotBefore))
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: poolOf(t, store.cert)}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store.key, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := openCA(ctx, store, nil); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a group-readable key: %v", err)
	}
	if err := os.Remove(store.key); err != nil {
		t.Fatal(err)
	}
	if _, err := openCA(ctx, store, nil); err == nil {
		t.Fatal("a CA certificate without its key was accepted (or replaced)")
	}
}

// permitted_domains: the CA carries them as name constraints (a leaf for
// another name does not verify even if minted), and the proxy refuses a
// CONNECT outside them before any TLS.
func TestInterceptPermittedDomains(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, func(c *Config) {
		c.Intercept = InterceptConfig{CAFile: filepath.Join(dir, "ca.pem"), CAKeyFile: filepath.Join(dir, "ca.key"),
			PermittedDomains: []string{"example.com"}}
	})
	h := f.issue(t, "api.write", "inv-permitted")
	if code, errCode, body := do(t, f.httpsClient(t, h, filepath.Join(dir, "ca.pem")), http.MethodGet, f.httpsURL("/ok"), nil, ""); code != http.StatusOK {
		t.Fatalf("inside the permitted domain: %d %q %s", code, errCode, body)
	}
	if _, status, code := rawConnect(t, f.addr, "b.a.example.org:"+itoa(f.up.port), h); status != http.StatusForbidden || code != CodeDestination {
		t.Fatalf("outside the permitted domains: %d %q", status, code)
	}
	ca := f.proxy.ca.Load()
	outside, err := ca.leaf("b.a.example.org")
	if err != nil {
		t.Fatal(err)
	}
	_, err = outside.Leaf.Verify(x509.VerifyOptions{DNSName: "b.a.example.org", Roots: poolOf(t, filepath.Join(dir, "ca.pem"))})
	var ce x509.CertificateInvalidError
	if !errors.As(err, &ce) || ce.Reason != x509.CANotAuthorizedForThisName {
		t.Fatalf("a leaf outside the name constraints verified: %v", err)
	}
}

// A two-step rotation with a plugin that read the bundle after stage:
// it keeps working across promote, and after promote the proxy signs with
// the new CA.
func TestInterceptCARotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := InterceptConfig{CAFile: filepath.Join(dir, "ca.pem"), CAKeyFile: filepath.Join(dir, "ca.key")}
	f := newFixture(t, func(c *Config) { c.Intercept = cfg })
	before, err := InterceptCA(ctx, cfg, nil, CAStatusAction)
	if err != nil || before.Next != nil || len(before.Trusted) != 1 {
		t.Fatalf("status %+v, %v", before, err)
	}
	if _, err := InterceptCA(ctx, cfg, nil, CAPromoteAction); !errors.Is(err, ErrNothingStaged) {
		t.Fatalf("promote with nothing staged: %v", err)
	}
	staged, err := InterceptCA(ctx, cfg, nil, CAStageAction)
	if err != nil || staged.Next == nil || staged.Signer != before.Signer || len(staged.Trusted) != 2 {
		t.Fatalf("stage: %+v, %v", staged, err)
	}
	if _, err := InterceptCA(ctx, cfg, nil, CAStageAction); !errors.Is(err, ErrAlreadyStaged) {
		t.Fatalf("a second stage: %v", err)
	}
	// A plugin started now reads the two-CA bundle.
	bundle := filepath.Join(t.TempDir(), "plugin-copy.pem")
	if b, err := os.ReadFile(cfg.CAFile); err != nil || os.WriteFile(bundle, b, 0o644) != nil {
		t.Fatal(err)
	}
	c := f.httpsClient(t, f.issue(t, "api.write", "inv-rotate"), bundle)
	if code, errCode, _ := do(t, c, http.MethodGet, f.httpsURL("/ok"), nil, ""); code != http.StatusOK {
		t.Fatalf("after stage: %d %q", code, errCode)
	}
	promoted, err := InterceptCA(ctx, cfg, nil, CAPromoteAction)
	if err != nil || promoted.Next != nil || promoted.Signer != *staged.Next || len(promoted.Trusted) != 2 {
		t.Fatalf("promote: %+v, %v", promoted, err)
	}
	f.proxy.reloadCA(ctx)
	if got := f.proxy.ca.Load().cert.Subject.CommonName; got != promoted.Signer.Subject {
		t.Fatalf("after reload the proxy signs with %q, want %q", got, promoted.Signer.Subject)
	}
	c.CloseIdleConnections()
	if code, errCode, _ := do(t, c, http.MethodGet, f.httpsURL("/ok"), nil, ""); code != http.StatusOK {
		t.Fatalf("after promote, with the bundle read after stage: %d %q", code, errCode)
	}
	// The next stage drops the retired CA.
	again, err := InterceptCA(ctx, cfg, nil, CAStageAction)
	if err != nil || len(again.Trusted) != 2 || again.Trusted[0] != promoted.Signer {
		t.Fatalf("second stage: %+v, %v", again, err)
	}
}

// Replicas sharing Vault: started at once they converge on one CA; a
// rotation written by one is what all load; the bundle is published to
// ca_file, the key never written to disk.
func TestInterceptCAVault(t *testing.T) {
	ctx := context.Background()
	vc := testenv.Vault(t).Client(t)
	var wg sync.WaitGroup
	subjects := make([]string, 4)
	files := make([]string, 4)
	for i := range subjects {
		files[i] = filepath.Join(t.TempDir(), "bundle.pem")
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := vaultCAStore{client: vc, mount: "secret", path: "airlock/intercept-ca-test", bundleFile: files[i]}
			ca, err := openCA(ctx, store, nil)
			if err != nil {
				t.Error(err)
				return
			}
			subjects[i] = ca.cert.Subject.CommonName + "/" + string(ca.cert.SerialNumber.String())
		}()
	}
	wg.Wait()
	for i := range subjects {
		if subjects[i] != subjects[0] {
			t.Fatalf("replicas disagree on the CA: %v", subjects)
		}
		if b, err := os.ReadFile(files[i]); err != nil || strings.Contains(string(b), "PRIVATE KEY") || !strings.Contains(string(b), "CERTIFICATE") {
			t.Fatalf("published bundle %d: %v", i, err)
		}
	}
	cfg := InterceptConfig{CAFile: files[0], Vault: InterceptVault{Mount: "secret", Path: "airlock/intercept-ca-test"}}
	staged, err := InterceptCA(ctx, cfg, vc, CAStageAction)
	if err != nil || staged.Next == nil {
		t.Fatalf("stage in Vault: %+v %v", staged, err)
	}
	promoted, err := InterceptCA(ctx, cfg, vc, CAPromoteAction)
	if err != nil || promoted.Signer != *staged.Next {
		t.Fatalf("promote in Vault: %+v %v", promoted, err)
	}
	other := vaultCAStore{client: vc, mount: "secret", path: "airlock/intercept-ca-test", bundleFile: files[1]}
	ca, err := openCA(ctx, other, nil)
	if err != nil || ca.cert.Subject.CommonName != promoted.Signer.Subject {
		t.Fatalf("another replica loads %v, %v", ca, err)
	}
}

// A CA key in a directory another local user may write to could be
// theirs, or be given to them (root gives a new file to its directory's
// owner): it is neither read nor made there.
func TestInterceptCARefusesAKeyDirectoryOthersMayWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	store := fileCAStore{cert: filepath.Join(dir, "ca.pem"), key: filepath.Join(dir, "ca.key")}
	if _, err := openCA(ctx, store, nil); !errors.Is(err, fsutil.ErrPlanted) {
		t.Fatalf("a CA in a directory anyone may write to: %v", err)
	}
	if _, err := os.Lstat(store.key); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a CA key was made: %v", err)
	}
}
