package config

import (
	"strings"
	"testing"
)

func TestExecutaConfigValidate(t *testing.T) {
	good := HostExecuta{
		JWKS:     "http://127.0.0.1:9464/.well-known/jwks.json",
		Sampling: ExecutaSampling{OpenAI: &ExecutaOpenAI{BaseURL: "http://api.example.test/v1", Model: "m", Intent: "llm.key"}},
		Plugins: []ExecutaPlugin{{Name: "tickets", Command: "/opt/plugins/tickets",
			Credentials: map[string]string{"TICKETS_API_KEY": "tickets.read"}}},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid section refused: %v", err)
	}
	bad := HostExecuta{
		JWKS:         "ftp://x",
		StorageQuota: -1,
		FilesListen:  "nowhere",
		Sampling:     ExecutaSampling{Fixture: "f.jsonl", OpenAI: &ExecutaOpenAI{BaseURL: "https://api.example.test"}},
		Plugins: []ExecutaPlugin{
			{Name: "Tickets", Command: "tickets"},
			{Name: "dup", Command: "/bin/true", Credentials: map[string]string{"1BAD": "x", "OK": ""}},
			{Name: "dup", Command: "/bin/true"},
		},
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad section accepted")
	}
	for _, want := range []string{
		"host.executa.jwks: must be an http(s) URL",
		"host.executa.storage_quota: must not be negative",
		"host.executa.files_listen:",
		"host.executa.sampling: set fixture or openai, not both",
		"sampling.openai.base_url: must be http://",
		"sampling.openai.model: required",
		"sampling.openai.intent: required",
		`plugins[0].name: must be lower-case`,
		`plugins[0].command: must be an absolute path`,
		`plugins[1].credentials: a key is not an environment variable name`,
		`plugins[1].credentials.OK: needs a broker intent`,
		`plugins[2].name: the same name as an earlier plugin`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	// Names the keys, never the values.
	for _, value := range []string{"Tickets", "1BAD", "nowhere", "api.example.test", "f.jsonl"} {
		if strings.Contains(err.Error(), value) {
			t.Errorf("errors quote the value %q:\n%v", value, err)
		}
	}
	endpoint := good
	endpoint.Sampling.OpenAI = &ExecutaOpenAI{BaseURL: "http://api.example.test/v1/chat/completions/", Model: "m", Intent: "llm.key"}
	if err := endpoint.Validate(); err == nil || !strings.Contains(err.Error(), "drop /chat/completions") {
		t.Errorf("a base_url naming the endpoint: %v", err)
	}
	// The host section reports the Executa problems too.
	if err := (Host{Control: "unix:/run/airlock/control.sock", Executa: bad}).Validate(); err == nil || !strings.Contains(err.Error(), "the same name as an earlier plugin") {
		t.Fatalf("host section: %v", err)
	}
}

// host.control_write_timeout parses, and Validate bounds it to 0..10m.
func TestControlWriteTimeout(t *testing.T) {
	for in, ok := range map[string]bool{"5m": true, "0s": true, "10m": true, "11m": false, "-1s": false} {
		cfg, err := Parse([]byte("version: v1\nhost:\n  control_write_timeout: " + in + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		err = cfg.Validate()
		if bad := err != nil && strings.Contains(err.Error(), "host.control_write_timeout"); bad == ok {
			t.Errorf("%s: validate %v", in, err)
		}
	}
}
