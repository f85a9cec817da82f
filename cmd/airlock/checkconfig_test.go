package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// One config with a problem of every class — a decoding error, bad enum
// values, listen addresses that are no address or whose port is out of
// range, intents named by sampling and by an Executa credential that
// broker.intents lacks, missing files — is reported whole by one run of
// check-config, and no message quotes a value of the config: each value
// is planted (PLANT…) and must not appear in the output.
func TestCheckConfigReportsEveryClassInOneRun(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %[1]q
log: {format: PLANTfmt01, level: PLANTlvl02}
admin: {listen: "PLANTlisten03"}
tokens: {algorithm: PLANTalg04, keys: {source: PLANTsrc05}}
vault: {address: "http://127.0.0.1:8200", auth: {method: PLANTmeth06}}
broker:
  max_handle_lifetime: PLANTdur07
  egress_proxy: "127.0.0.1:70000"
  store: {type: PLANTstore08}
  intents:
    api.read:
      class: read
      secret: {source: PLANTsecsrc09, path: x, field: y}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: ["https://api.example.com/"]
proxy:
  listen: "127.0.0.1:99999"
  upstream_ca_file: %[1]s/PLANTcafile10
  resolve: {api.example.com: [PLANTip11]}
host:
  admin: "PLANThost12"
  policy: %[1]s/PLANTpolicy13
  executa:
    jwks: PLANTjwks14
    files_listen: "PLANT host15:80"
    sampling: {openai: {base_url: "http://api.example.com:PLANT16", model: m, intent: PLANTnointent17}}
    plugins:
      - name: PLANTName18
        command: PLANTcmd19
        credentials: {API_KEY: PLANTnointent20, "PLANT-env21": api.read}
`, dir))
	out, stderr, code := cli(t, nil, "", "check-config", cfg)
	if code != 1 {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"line 8: cannot unmarshal !!str into time.Duration", // decoding
		"log.format: must be one of",
		"log.level: must be one of",
		"admin.listen: must be host:port",
		"tokens.algorithm: must be",
		"tokens.keys.source: must be one of",
		"vault.auth.method: must be one of",
		"broker.egress_proxy: the port must be a number from 0 to 65535",
		"broker.store.type: must be one of",
		"broker.intents.api.read.secret.source: must be one of",
		"proxy.listen: the port must be a number from 0 to 65535",
		"proxy.resolve.api.example.com[0]: not an IP address",
		"host.admin: must be host:port",
		"host.executa.files_listen: the host must be an IP address or a DNS name",
		"host.executa.jwks: must be an http(s) URL",
		"host.executa.sampling.openai.base_url:",
		"host.executa.sampling.openai.intent: names no intent of broker.intents",
		"host.executa.plugins[0].name: must be",
		"host.executa.plugins[0].command: must be an absolute path",
		"host.executa.plugins[0].credentials: a key is not an environment variable name",
		"host.executa.plugins[0].credentials.API_KEY: names no intent of broker.intents",
		"proxy.upstream_ca_file: the file does not exist", // files
		"host.policy: the file does not exist",
		"sandbox: ", // the sandbox stage ran too
	} {
		if !strings.Contains(out+stderr, want) {
			t.Errorf("check-config lacks %q", want)
		}
	}
	if leaked := regexp.MustCompile(`PLANT[A-Za-z0-9-]*`).FindAllString(out+stderr, -1); len(leaked) > 0 {
		t.Errorf("check-config quotes config values %v", leaked)
	}
	if t.Failed() {
		t.Logf("output:\n%s%s", out, stderr)
	}
}

// --serve checks serve's files and not the host's, --host the host's and
// not serve's: each unit's ExecStartPre can run as its own user, which
// cannot enter the other's state directory.
func TestCheckConfigScopes(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %[1]q
proxy: {upstream_ca_file: %[1]s/serve-ca.pem}
host: {policy: %[1]s/host-policy.yaml}
`, dir))
	for _, c := range []struct {
		flag, want, not string
	}{
		{"--serve", "proxy.upstream_ca_file", "host.policy"},
		{"--host", "host.policy", "proxy.upstream_ca_file"},
	} {
		_, stderr, code := cli(t, nil, "", "check-config", c.flag, cfg)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, c.not) {
			t.Errorf("check-config %s: exit %d, want %s and not %s:\n%s", c.flag, code, c.want, c.not, stderr)
		}
	}
	if _, _, code := cli(t, nil, "", "check-config", "--serve", "--host", cfg); code != 2 {
		t.Errorf("--serve --host: exit %d, want 2 (usage)", code)
	}
	// Each passes when its own files are there.
	os.WriteFile(filepath.Join(dir, "serve-ca.pem"), nil, 0o644)
	if out, stderr, code := cli(t, nil, "", "check-config", "--serve", cfg); code != 0 || !strings.Contains(out, "OK") {
		t.Errorf("--serve with its files: exit %d\n%s%s", code, out, stderr)
	}
}

// More keys with planted values — names, headers, templates,
// destinations, CIDRs, domains, users, groups, paths, regular
// expressions — and not one of them is echoed.
func TestCheckConfigEchoesNoValue(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %[1]q
broker:
  secrets: {file: %[1]s/PLANTsecrets}
  store: {type: redis, redis: {address: "PLANTredis:0"}}
  api: {group: PLANTgroup, allowed_users: [PLANTuser], tcp: {listen: "PLANTtcp"}}
  intents:
    a.read:
      class: PLANTclass
      secret: {source: file, path: PLANTpath, field: y}
      inject: {header: {name: "PLANT hdr", template: "Bearer PLANTtpl"}}
      destinations: ["https://PLANTdest1_/x", {host: "PLANTdest2..", path_prefix: "PLANTprefix"}, "ftp://PLANTdest3"]
proxy:
  allow_cidrs: [PLANTcidr]
  intercept: {ca_file: %[1]s/PLANTca, permitted_domains: [PLANTDOM]}
vault: {address: "PLANTvault://x"}
host:
  control: "PLANTcontrol"
  broker: "PLANTbroker"
  redact: ["PLANT(("]
  stderr_level: PLANTlvl
  sandbox: {level: PLANTlevel, read_only: [PLANTro]}
  executa:
    plugins:
      - {name: ok, command: /bin/true, env: {"PLANT=": x}, inherit_env: ["PLANT-x"]}
`, dir))
	out, stderr, code := cli(t, nil, "", "check-config", cfg)
	if code != 1 || strings.Count(stderr, "\n") < 20 {
		t.Fatalf("exit %d, want 1 with every problem:\n%s%s", code, out, stderr)
	}
	if leaked := regexp.MustCompile(`PLANT[A-Za-z0-9_.=(-]*`).FindAllString(out+stderr, -1); len(leaked) > 0 {
		t.Fatalf("check-config quotes config values %v:\n%s%s", leaked, out, stderr)
	}
}
