package daemon

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/tokens"
)

// A key file serve cannot reread (here: made readable by others, which
// the loaders refuse, as they refuse one another user rewrote) makes
// /readyz name the reload and counts the failure; serve keeps its keys
// and is ready again once the file is fixed.
func TestServeNotReadyWhileKeysCannotBeReread(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	cfg.Tokens.Keys = tokens.KeysConfig{Source: tokens.SourceFile, Path: filepath.Join(dir, "signing-keys.pem")}
	cfg.Tokens.Refresh = time.Second
	cfg.Proxy.Intercept.CAFile = filepath.Join(dir, "ca.pem")
	cfg.Proxy.Intercept.CAKeyFile = filepath.Join(dir, "ca.key")
	cfg.Proxy.Intercept.Reload = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr := serveForTest(t, cfg).Admin
	waitReadyz(t, addr, http.StatusOK, "", "keys readable")

	for _, c := range []struct{ file, check string }{
		{cfg.Tokens.Keys.Path, "signing_keys_reload"},
		{cfg.Proxy.Intercept.CAKeyFile, "intercept_ca_reload"},
	} {
		key := regexp.MustCompile(`_reload$`).ReplaceAllString(c.check, "")
		before := reloadFailures(t, addr, key)
		if err := os.Chmod(c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		waitReadyz(t, addr, http.StatusServiceUnavailable, c.check, c.check+" failing")
		if after := reloadFailures(t, addr, key); after <= before {
			t.Fatalf("%s: failures %v then %v: not counted", key, before, after)
		}
		if err := os.Chmod(c.file, 0o600); err != nil {
			t.Fatal(err)
		}
		waitReadyz(t, addr, http.StatusOK, "", c.check+" fixed")
	}
}

func reloadFailures(t *testing.T, addr, key string) float64 {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^airlock_key_reload_failures_total\{key="` + key + `"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no airlock_key_reload_failures_total for %s", key)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
