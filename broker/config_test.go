package broker

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfigValidate(t *testing.T) {
	good := testConfig("/etc/airlock/secrets.yaml")
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	bad := Config{
		EgressProxy:     "nohostport",
		Store:           StoreConfig{Type: "redis", Redis: RedisConfig{RevocationReplicas: -2, RevocationWait: -time.Second}},
		PassTTL:         time.Second,
		MaxPassLifetime: time.Millisecond,
		Intents: map[string]Intent{
			"Bad Name": {Class: "admin", Secret: SecretRef{Source: "vault", Path: "/abs", KVVersion: 3, Mount: "secret"},
				Inject: Inject{}},
			"ok.header": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Mount: "secret", Path: "x", Field: "f"},
				Inject: Inject{Kind: &HeaderInject{Name: "X-Key", Template: "{{secret}}\r\nX-Evil: 1"}}},
			"ok.basic": {Class: ClassWrite, Secret: SecretRef{Source: SourceFile, Path: "x", Field: "f"},
				Inject: Inject{Kind: &BasicInject{}}},
			"ok.dest": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Mount: "secret", Path: "x", Field: "f"},
				Inject:       Inject{Kind: &PlaceholderInject{Headers: []string{"Host"}}},
				Destinations: []Destination{{Host: "127.0.0.1"}}},
		},
	}.WithDefaults()
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{
		"broker.egress_proxy", "broker.store.redis.address", "intents.Bad Name: intent names",
		"intents.Bad Name.class", "intents.Bad Name.secret.kv_version", "intents.Bad Name.secret.path",
		"intents.Bad Name.secret.field", "intents.Bad Name.inject: exactly one",
		"intents.ok.header.inject.header.template: must not contain CR",
		"intents.ok.basic.secret.source: file needs broker.secrets.file", "intents.ok.basic.inject.basic: exactly one",
		"intents.ok.dest.inject.placeholder.headers[0]", "intents.ok.dest.destinations[0]",
		"broker.pass_ttl: must be between 2s and 24h", "broker.max_pass_lifetime: must be 0 (no limit) or between pass_ttl",
		"broker.store.redis.revocation_replicas", "broker.store.redis.revocation_wait",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(err)
	}
}

func TestDestinationYAML(t *testing.T) {
	var got struct {
		D []Destination `yaml:"d"`
	}
	in := `d:
  - https://API.Example.com./v1/
  - https://uploads.example.com:8443
  - {host: "*.example.org", methods: [get, Post], path_prefix: /x}
`
	if err := yaml.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := []Destination{
		{Host: "api.example.com", Port: 443, PathPrefix: "/v1/", Methods: []string{}},
		{Host: "uploads.example.com", Port: 8443, PathPrefix: "/", Methods: []string{}},
		{Host: "*.example.org", Port: 443, PathPrefix: "/x", Methods: []string{"GET", "POST"}},
	}
	for i := range want {
		g, w := got.D[i], want[i]
		if g.Host != w.Host || g.Port != w.Port || g.PathPrefix != w.PathPrefix || strings.Join(g.Methods, ",") != strings.Join(w.Methods, ",") {
			t.Errorf("[%d] = %+v, want %+v", i, g, w)
		}
	}
}

func TestParseDestinationRejects(t *testing.T) {
	for _, s := range []string{
		"http://api.example.com", "https://user:pw@api.example.com", "https://10.0.0.1/", "https://[::1]/",
		"https://localhost/", "https://api.example.com/../etc", "https://api.example.com/?q=1", "https://api.example.com:0",
		"https://api.example.com:99999", "https://bücher.example/", "https://-bad.example.com/", "https://a..b.com/",
		"https://*.*.example.com/", "api.example.com",
	} {
		if d, err := ParseDestination(s); err == nil {
			t.Errorf("%q accepted as %+v", s, d)
		}
	}
}

func FuzzParseDestination(f *testing.F) {
	for _, s := range []string{"https://api.example.com/v1/", "https://*.example.com:8443/x", "https://[::1]/", "http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDestination(s)
		if err != nil {
			return
		}
		if d.Port < 1 || d.Port > 65535 || !strings.HasPrefix(d.PathPrefix, "/") || d.Host != strings.ToLower(d.Host) {
			t.Fatalf("accepted %q as %+v", s, d)
		}
		again, err := d.Normalize()
		if err != nil || again.Host != d.Host || again.Port != d.Port || again.PathPrefix != d.PathPrefix {
			t.Fatalf("normalize not idempotent for %q", s)
		}
	})
}
