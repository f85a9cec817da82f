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
	if err == nil || strings.Contains(err.Error(), `"storage.user"`) || strings.Contains(err.Error(), "telepathy") || strings.Contains(err.Error(), "bad name") {
		t.Errorf("the error echoes a value of the plugin's: %v", err)
	}
	for _, want := range []string{"version: must be SemVer", "host_capabilities[0]: storage.user, storage.app and storage.tool are not valid capabilities",
		"host_capabilities[1]: unknown", "tools[0].timeout", "parameters[0].name", "parameters[0].type", "tools[1].name", "credentials[0].name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestPluginEnv(t *testing.T) {
	user := []string{"PATH=/bin", "HOME=/h", "LANG=C", "VAULT_TOKEN=s.x", "AIRLOCK_CONFIG=/c", "EDITOR=vi", "OPENAI_API_KEY=sk-x",
		"AWS_SECRET_ACCESS_KEY=k", "HTTPS_PROXY=http://evil", "CUSTOM_SECRET=1", "TMPDIR=/tmp", "PYTHONPATH=/py", "NO_PROXY=*"}
	base := envSpec{}
	for _, tt := range []struct {
		name       string
		spec       func(envSpec) envSpec
		want, gone []string
	}{
		{"minimal by default", func(s envSpec) envSpec { return s },
			[]string{"PATH=/bin", "HOME=/h", "LANG=C"},
			[]string{"EDITOR", "OPENAI_API_KEY", "VAULT_TOKEN", "PYTHONPATH", "TMPDIR", "NO_PROXY", "HTTPS_PROXY", "SSL_CERT_FILE"}},
		{"explicit values and inherited names", func(s envSpec) envSpec {
			s.set = map[string]string{"UNITS": "metric", "HTTP_PROXY": "http://evil"}
			s.inherit = []string{"PYTHON*", "VAULT_TOKEN"}
			return s
		},
			[]string{"UNITS=metric", "PYTHONPATH=/py"},
			[]string{"EDITOR", "VAULT_TOKEN", "HTTP_PROXY"}},
		{"the variables the launch layer owns are never set from config", func(s envSpec) envSpec {
			s.set = map[string]string{"SSL_CERT_FILE": "/evil.pem", "TMPDIR": "/x", "NO_PROXY": "*"}
			return s
		},
			[]string{"PATH=/bin"},
			[]string{"SSL_CERT_FILE", "HTTPS_PROXY", "TMPDIR", "NO_PROXY"}},
		{"inherit all minus the deny list", func(s envSpec) envSpec {
			s.inheritAll, s.deny = true, []string{"CUSTOM_*"}
			return s
		},
			[]string{"EDITOR=vi", "OPENAI_API_KEY=sk-x", "PATH=/bin"},
			[]string{"VAULT_TOKEN", "AIRLOCK_CONFIG", "AWS_SECRET", "HTTPS_PROXY=http://evil", "CUSTOM_SECRET", "TMPDIR=/tmp"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := " " + strings.Join(pluginEnv(user, tt.spec(base)), " ") + " "
			for _, w := range tt.want {
				if !strings.Contains(env, " "+w+" ") {
					t.Errorf("%s missing: %s", w, env)
				}
			}
			for _, g := range tt.gone {
				if strings.Contains(env, " "+g) {
					t.Errorf("%s passed: %s", g, env)
				}
			}
		})
	}
}

// What the published SDKs send and the notes do not: an object runtime,
// no top-level name, a credential default. A field of the wrong type is
// named, never echoed.
func TestManifestSDKVariants(t *testing.T) {
	m, err := ParseManifest([]byte(`{"display_name":"Notebook","version":"0.1.1","runtime":{"type":"uv","min_version":"0.1.0"},
	  "tools":[{"name":"note_append","parameters":[{"name":"text","type":"string","required":true}]}],
	  "credentials":[{"name":"UNITS","sensitive":false,"default":"metric"},{"name":"DAYS","sensitive":false,"default":3},{"name":"KEY"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "" || m.Runtime.Type != "uv" || string(m.Runtime.Raw) != `{"type":"uv","min_version":"0.1.0"}` {
		t.Fatalf("manifest: %+v", m)
	}
	if got := []string{m.Credentials[0].DefaultString(), m.Credentials[1].DefaultString(), m.Credentials[2].DefaultString()}; got[0] != "metric" || got[1] != "3" || got[2] != "" {
		t.Fatalf("defaults: %q", got)
	}
	for _, rt := range []string{`"python"`, `{"type":"npm"}`, `{"type":"binary"}`, `null`} {
		if _, err := ParseManifest([]byte(`{"version":"1.0.0","runtime":` + rt + `,"tools":[{"name":"t"}]}`)); err != nil {
			t.Errorf("runtime %s: %v", rt, err)
		}
	}
	for _, tt := range []struct{ doc, want string }{
		{`{"version":"1.0.0","runtime":42,"tools":[{"name":"t"}]}`, "runtime: must be a string or an object"},
		{`{"version":"1.0.0","tools":[{"name":"t","timeout":"soon-secret-value"}]}`, "tools.timeout: must be a number"},
		{`{"version":"1.0.0","tools":"secret-value"}`, "tools: must be an array"},
		{`["secret-value"]`, "must be a JSON object"},
		{`{"version":`, "not valid JSON"},
	} {
		_, err := ParseManifest([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%s: %v, want %q without the value", tt.doc, err, tt.want)
		}
	}
}
