package executa

import (
	"strings"
	"testing"
)

func TestParseManifest(t *testing.T) {
	good := `{"name":"my-tool","version":"0.1.0","host_capabilities":["llm.sample","aps.kv","aps.scope.app"],
	  "tools":[{"name":"summarize","timeout":30,"parameters":[{"name":"text","type":"string"}]}],
	  "credentials":[{"name":"OPENAI_API_KEY","sensitive":true}]}`
	m, err := ParseManifest([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if !m.wantsStorageToken() || !m.Has(CapSample) {
		t.Fatal("capabilities lost")
	}
	bad := `{"version":"one","host_capabilities":["storage.user","telepathy"],
	  "tools":[{"name":"a","timeout":99999,"parameters":[{"name":"","type":"date"}]},{"name":"a"}],
	  "credentials":[{"name":"bad name"}]}`
	_, err = ParseManifest([]byte(bad))
	for _, want := range []string{"name: required", "version: must be SemVer", `"storage.user" is not a valid capability`,
		"host_capabilities[1]: unknown", "tools[0].timeout", "parameters[0].name", "parameters[0].type", "tools[1].name", "credentials[0].name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestPluginEnv(t *testing.T) {
	user := []string{"PATH=/bin", "HOME=/h", "LANG=C", "VAULT_TOKEN=s.x", "AIRLOCK_CONFIG=/c", "EDITOR=vi",
		"AWS_SECRET_ACCESS_KEY=k", "HTTPS_PROXY=http://evil", "CUSTOM_SECRET=1", "TMPDIR=/tmp"}
	env := strings.Join(pluginEnv(user, false, []string{"CUSTOM_*"}, "127.0.0.1:8899", "/priv"), " ")
	for _, gone := range []string{"VAULT_TOKEN", "AIRLOCK_CONFIG", "AWS_SECRET", "https://evil", "HTTPS_PROXY=http://evil", "CUSTOM_SECRET", "TMPDIR=/tmp"} {
		if strings.Contains(env, gone) {
			t.Errorf("%s passed: %s", gone, env)
		}
	}
	for _, kept := range []string{"PATH=/bin", "EDITOR=vi", "HTTP_PROXY=http://127.0.0.1:8899", "http_proxy=http://127.0.0.1:8899", "TMPDIR=/priv"} {
		if !strings.Contains(env, kept) {
			t.Errorf("%s missing: %s", kept, env)
		}
	}
	strict := strings.Join(pluginEnv(user, true, nil, "127.0.0.1:8899", "/priv"), " ")
	if strings.Contains(strict, "EDITOR") || !strings.Contains(strict, "LANG=C") || !strings.Contains(strict, "HTTP_PROXY") {
		t.Errorf("strict env: %s", strict)
	}
}
