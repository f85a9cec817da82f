package executa

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/launch"
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
}

// pluginEnv builds a plugin's environment from the host's: minimalKeep
// and the inherit names, or (inheritAll) everything minus the deny list;
// then the explicit values. What the launch layer owns (launch.Owned:
// TMPDIR, the proxy variables, NO_PROXY) is never taken from either.
func pluginEnv(user []string, spec envSpec) []string {
	deny := append(append([]string(nil), defaultDeny...), spec.deny...)
	keep := append(append([]string(nil), minimalKeep...), spec.inherit...)
	owned := launch.Owned
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
	return out
}

// installDir is what an Executa plugin sees of its own files, read-only:
// the directory of its script (the first argument that is an absolute
// path to a file) or else of its command.
func installDir(command string, args []string) string {
	for _, a := range args {
		if filepath.IsAbs(a) {
			if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
				return filepath.Dir(a)
			}
		}
	}
	return filepath.Dir(command)
}

func denied(patterns []string, k string) bool {
	for _, p := range patterns {
		if p == k || strings.HasSuffix(p, "*") && strings.HasPrefix(k, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}
