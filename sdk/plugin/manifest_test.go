package plugin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

const goodManifest = `name: tickets
version: 1.0.0
ports: [numinance.ports.tickets.v1]
credential_intents:
  - name: tickets.read
    class: read
    destinations: [{host: api.example.com, port: 443, methods: [GET]}]
`

// A manifest that does not fit plugin/v1 Manifest is refused with the
// path of the field, never the package's value.
func TestDecodeManifestNamesFieldNotValue(t *testing.T) {
	if _, err := DecodeManifest([]byte(goodManifest)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"string for a port", strings.Replace(goodManifest, "port: 443", "port: password-hunter2", 1),
			"credential_intents[0].destinations[0].port: must be an integer from 0 to 4294967295"},
		{"port out of range", strings.Replace(goodManifest, "port: 443", "port: 99999999999", 1),
			"credential_intents[0].destinations[0].port: must be an integer"},
		{"number for a name", strings.Replace(goodManifest, "name: tickets\n", "name: 12345678\n", 1), "name: must be a string"},
		{"mapping for a list", strings.Replace(goodManifest, "[GET]", "{password-hunter2: x}", 1),
			"credential_intents[0].destinations[0].methods: must be a list"},
		{"unknown key", goodManifest + "password-hunter2: 1\n", "manifest: unknown field (known: name, version"},
		{"a list for the manifest", "- password-hunter2\n", "manifest: must be a mapping"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeManifest([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") ||
				strings.Contains(err.Error(), "12345678") || strings.Contains(err.Error(), "99999999999") {
				t.Fatalf("err = %v, want %q and no value", err, tt.want)
			}
		})
	}
}

// FuzzDecodeManifest holds the shape check to protojson: whatever the
// shape check refuses, protojson refuses too (it never turns a manifest
// away that the protocol's decoder takes), and no error quotes a value.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte("name: x\nversion: '1'\ncredential_intents: [{destinations: [{port: '443'}]}]\n"))
	f.Add([]byte("credential_intents: [{destinations: [{port: 1e3}]}]\n"))
	f.Add([]byte("credentialIntents: [{destinations: [{port: 4294967296}]}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var doc any
		if yaml.Unmarshal(b, &doc) != nil {
			return
		}
		j, err := json.Marshal(doc)
		if err != nil {
			return
		}
		var shape any
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber()
		if dec.Decode(&shape) != nil {
			return
		}
		m := &pluginv1.Manifest{}
		if serr := shapeError(shape, m.ProtoReflect().Descriptor(), ""); serr != nil {
			if protojson.Unmarshal(j, m) == nil {
				t.Fatalf("shape check refused what protojson takes: %s: %v", j, serr)
			}
		}
		if _, err := DecodeManifest(b); err != nil && strings.Contains(err.Error(), `"`) {
			t.Fatalf("error quotes a value: %v", err)
		}
	})
}
