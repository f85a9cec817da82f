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
	"github.com/airlock-dev/airlock/host"
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
		keys: sn.ring, egressProxy: sn.proxyAddr, admin: sn.admin, registry: sn.registry, policy: host.AllowAll()})
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
	for _, f := range []string{"../deploy/prometheus/alerts.yaml", "../deploy/grafana/airlock.json"} {
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
