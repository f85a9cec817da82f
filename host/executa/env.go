package executa

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/egressenv"
)

// Variables that could hand a plugin a secret or authority: never passed.
var defaultDeny = []string{"VAULT_*", "AIRLOCK_*", "BAO_*", "AWS_*", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_*",
	"KUBECONFIG", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
	"https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"}

// minimalKeep is what a plugin gets of the host's environment by default.
var minimalKeep = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// envSpec is how a plugin's environment is built.
type envSpec struct {
	set        map[string]string // explicit values (PluginConfig.Env)
	inherit    []string          // names or "X_*" prefixes taken from the host
	inheritAll bool              // the host's environment minus the deny list
	deny       []string          // extra deny patterns (with inheritAll)
	proxy      string            // egress proxy host:port
	caFile     string            // the intercept CA certificate's copy in the plugin's directory
	pass       string            // the plugin's pass, for HTTPS_PROXY
	noProxy    []string          // host:port the plugin reaches directly (the host's files endpoint)
	tmpdir     string
}

// pluginEnv builds a plugin's environment from the host's: minimalKeep
// and the inherit names, or (inheritAll) everything minus the deny list;
// then the explicit values; then what the host owns, which nothing
// overrides: TMPDIR (the private directory where file-transport files
// must be), the egress proxy in both spellings, and NO_PROXY naming only
// the host's own endpoints.
func pluginEnv(user []string, spec envSpec) []string {
	deny := append(append([]string(nil), defaultDeny...), spec.deny...)
	keep := append(append([]string(nil), minimalKeep...), spec.inherit...)
	owned := append([]string{"TMPDIR", "NO_PROXY", "no_proxy"}, egressenv.Names...)
	var out []string
	for _, kv := range user {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || slices.Contains(owned, k) || spec.set[k] != "" {
			continue
		}
		if spec.inheritAll && !denied(deny, k) || !spec.inheritAll && denied(keep, k) && !denied(defaultDeny, k) {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.set)) {
		if !slices.Contains(owned, k) {
			out = append(out, k+"="+spec.set[k])
		}
	}
	out = append(out, egressenv.Vars(spec.proxy, spec.caFile, spec.pass)...)
	if len(spec.noProxy) > 0 {
		np := strings.Join(spec.noProxy, ",")
		out = append(out, "NO_PROXY="+np, "no_proxy="+np)
	}
	if spec.tmpdir != "" {
		out = append(out, "TMPDIR="+spec.tmpdir)
	}
	return out
}

func denied(patterns []string, k string) bool {
	for _, p := range patterns {
		if p == k || strings.HasSuffix(p, "*") && strings.HasPrefix(k, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// egressSetup installs the intercept CA certificate in dir and mints the
// plugin's pass for the hosts of the intents its credentials map to;
// nothing when the proxy does not intercept or the plugin opted out.
func egressSetup(ctx context.Context, cfg PluginConfig, opts Options, dir string) (ca string, pass broker.Issued, err error) {
	if opts.EgressProxy == "" || opts.InterceptCAFile == "" || opts.NoHTTPSProxy {
		return "", pass, nil
	}
	if ca, err = egressenv.InstallCA(opts.InterceptCAFile, dir); err != nil {
		return "", pass, fmt.Errorf("installing the intercept CA certificate for the plugin: %w", err)
	}
	intents := slices.Sorted(maps.Values(cfg.Credentials))
	if len(intents) > 0 && opts.Broker != nil {
		if pass, err = egressenv.Pass(ctx, opts.Broker, cfg.Name, nil, slices.Compact(intents), opts.Log); err != nil {
			return "", pass, err
		}
	}
	return ca, pass, nil
}
