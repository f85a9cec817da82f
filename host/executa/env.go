package executa

import (
	"strings"
)

// Variables that could hand a plugin a secret or authority: never passed.
var defaultDeny = []string{"VAULT_*", "AIRLOCK_*", "BAO_*", "AWS_*", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_*",
	"KUBECONFIG", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
	"https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"}

// strictKeep is all strict mode passes of the user's environment.
var strictKeep = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// pluginEnv builds a plugin's environment from the user's: minus the deny
// list (defaults plus extra; "X_*" matches a prefix), or only strictKeep
// in strict mode; then the egress proxy in both spellings, and TMPDIR set
// to the plugin's private directory (where file transport files must be).
func pluginEnv(user []string, strict bool, extraDeny []string, proxy, tmpdir string) []string {
	deny := append(append([]string(nil), defaultDeny...), extraDeny...)
	var out []string
	for _, kv := range user {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "TMPDIR" {
			continue
		}
		if strict {
			if contains(strictKeep, k) {
				out = append(out, kv)
			}
			continue
		}
		if !denied(deny, k) {
			out = append(out, kv)
		}
	}
	if proxy != "" {
		out = append(out, "HTTP_PROXY=http://"+proxy, "http_proxy=http://"+proxy)
	}
	if tmpdir != "" {
		out = append(out, "TMPDIR="+tmpdir)
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

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
