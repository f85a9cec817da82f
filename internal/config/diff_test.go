package config

import (
	"slices"
	"testing"
)

// A reload logs what changed: key paths, never the values, and nothing
// for an unchanged file.
func TestChanges(t *testing.T) {
	base := `version: v1
broker:
  intents:
    a.read: {class: read, secret: {source: file, path: a, field: key}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
    b.read: {class: read, secret: {source: file, path: b, field: key}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
  secrets: {file: /etc/airlock/secrets.yaml}
proxy:
  limits: {per_plugin_rps: 10}
`
	for _, tt := range []struct {
		name, next string
		want       []string
	}{
		{"same file", base, nil},
		{"an intent and a limit", `version: v1
broker:
  intents:
    a.read: {class: read, secret: {source: file, path: a2, field: key}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
    c.read: {class: read, secret: {source: file, path: c, field: key}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
  secrets: {file: /etc/airlock/secrets.yaml}
proxy:
  limits: {per_plugin_rps: 20}
`, []string{"broker.intents.a.read", "broker.intents.b.read", "broker.intents.c.read",
			"proxy.limits.per_plugin_burst", "proxy.limits.per_plugin_rps"}}, // the burst follows the rate,
		// What follows from a setting changes with it.
		{"admin listener", base + "admin: {listen: 127.0.0.1:9999}\n", []string{"admin.listen", "host.executa.jwks"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Parse([]byte(base))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Parse([]byte(tt.next))
			if err != nil {
				t.Fatal(err)
			}
			if got := Changes(a, b); !slices.Equal(got, tt.want) {
				t.Fatalf("Changes = %v, want %v", got, tt.want)
			}
		})
	}
}
