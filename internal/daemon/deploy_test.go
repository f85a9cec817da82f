package daemon

import (
	"context"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/broker"
	hostpolicy "github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Every metric the shipped dashboard and alert rules use is one that
// airlock serve and airlock host register (with Vault configured, as in
// production).
func TestDashboardAndAlertMetricsExist(t *testing.T) {
	v := testenv.Vault(t)
	t.Setenv("VAULT_TOKEN", v.RootToken)
	cfg := testConfig(t)
	cfg.Vault.Address = v.Addr
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sn, err := startServe(ctx, cfg, Options{}.withDefaults(), serveParts{})
	if err != nil {
		t.Fatal(err)
	}
	defer sn.stop()
	hn, err := startHost(ctx, cfg, Options{}.withDefaults(), hostDeps{broker: sn.broker, tokens: broker.LocalMinter{Issuer: sn.issuer},
		keys: sn.ring, egressProxy: sn.proxyAddr, admin: sn.admin, registry: sn.registry, policy: hostpolicy.AllowAll()})
	if err != nil {
		t.Fatal(err)
	}
	defer hn.stop()

	registered := map[string]bool{}
	descs := make(chan *prometheus.Desc, 1024)
	go func() { sn.registry.Describe(descs); close(descs) }()
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := name.FindStringSubmatch(d.String()); m != nil {
			registered[m[1]] = true
		}
	}
	used := map[string]bool{}
	for _, f := range []string{"../../deploy/prometheus/alerts.yaml", "../../deploy/grafana/airlock.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`airlock_[a-z0-9_]+`).FindAllString(string(b), -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(m, suffix); base != m && registered[base] {
					m = base
				}
			}
			used[m] = true
		}
	}
	var missing []string
	for m := range used {
		if !registered[m] {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(used) < 15 || len(missing) > 0 {
		t.Fatalf("%d metrics used; not exported: %v", len(used), missing)
	}
}

// The config shipped beside the systemd units validates and puts each
// file where its unit's user owns it: serve's keys in airlock-broker's
// state, the broker socket and token in serve's runtime directory (shared
// with the group airlock), the host's state and control socket in
// airlock-host's own.
func TestSystemdConfigMatchesUnits(t *testing.T) {
	cfg, err := config.Load("../../deploy/systemd/airlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	units := map[string]string{}
	for _, u := range []string{"airlock-serve", "airlock-host"} {
		b, err := os.ReadFile("../../deploy/systemd/" + u + ".service")
		if err != nil {
			t.Fatal(err)
		}
		units[u] = string(b)
	}
	under := func(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }
	for _, c := range []struct {
		what, path, dir, unit, directive string
	}{
		{"tokens.keys.path", cfg.Tokens.Keys.Path, "/var/lib/airlock-broker", "airlock-serve", "StateDirectory=airlock-broker"},
		{"broker.api.socket", cfg.Broker.API.Socket, "/run/airlock", "airlock-serve", "RuntimeDirectory=airlock"},
		{"broker.api.token_file", cfg.Broker.API.TokenFile, "/run/airlock", "airlock-serve", "RuntimeDirectory=airlock"},
		{"state_dir", cfg.StateDir + "/x", "/var/lib/airlock-host", "airlock-host", "StateDirectory=airlock-host"},
		{"host.evidence_key", cfg.Host.EvidenceKey, "/var/lib/airlock-host", "airlock-host", "StateDirectory=airlock-host"},
		{"host.control", strings.TrimPrefix(cfg.Host.Control, "unix:"), "/run/airlock-host", "airlock-host", "RuntimeDirectory=airlock-host"},
		{"host.control_token_file", cfg.Host.ControlTokenFile, "/run/airlock-host", "airlock-host", "RuntimeDirectory=airlock-host"},
		{"proxy.intercept.ca_key_file", cfg.Proxy.Intercept.CAKeyFile, "/var/lib/airlock-broker", "airlock-serve", "StateDirectory=airlock-broker"},
		// Persistent and shared (airlock.tmpfiles): never in /run, which a
		// reboot empties while the key stays.
		{"proxy.intercept.ca_file", cfg.Proxy.Intercept.CAFile, "/var/lib/airlock", "airlock-serve", "ReadWritePaths=/var/lib/airlock"},
	} {
		if !under(c.path, c.dir) || !regexp.MustCompile(`(?m)^`+c.directive+`$`).MatchString(units[c.unit]) {
			t.Errorf("%s = %s: want it under %s, the %s of %s", c.what, c.path, c.dir, c.directive, c.unit)
		}
	}
	if cfg.Broker.API.Group != "airlock" || !strings.Contains(units["airlock-serve"], "\nGroup=airlock\n") ||
		!strings.Contains(units["airlock-host"], "\nSupplementaryGroups=airlock\n") {
		t.Errorf("the broker socket's group (%q) is not the one serve runs with and the host is in", cfg.Broker.API.Group)
	}
}
