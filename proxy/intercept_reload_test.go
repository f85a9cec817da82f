package proxy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A reread of the intercept CA that fails (its key made readable by
// others, or unreadable after a rotation by the wrong user) keeps the CA
// in use, and is recorded and counted until a reread succeeds.
func TestInterceptCAReloadFailureIsRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := InterceptConfig{CAFile: filepath.Join(dir, "ca.pem"), CAKeyFile: filepath.Join(dir, "ca.key")}
	f := newFixture(t, func(c *Config) { c.Intercept = cfg })
	signer := f.proxy.ca.Load().cert.Subject.CommonName
	if err := os.Chmod(cfg.CAKeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	f.proxy.reloadCA(ctx)
	if f.proxy.CAReload().Err() == nil || f.proxy.CAReload().Failures() != 1 {
		t.Fatalf("failed reread: %v, %v failures", f.proxy.CAReload().Err(), f.proxy.CAReload().Failures())
	}
	if got := f.proxy.ca.Load().cert.Subject.CommonName; got != signer {
		t.Fatal("a failed reread replaced the CA in use")
	}
	if err := os.Chmod(cfg.CAKeyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	f.proxy.reloadCA(ctx)
	if err := f.proxy.CAReload().Err(); err != nil {
		t.Fatalf("after a good reread: %v", err)
	}
}
