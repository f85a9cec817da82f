package executa

import (
	"encoding/json"
	"testing"
)

// A tool's parameters become the schema of its arguments: types,
// required unless the parameter says otherwise, enums, defaults and
// items; what the schema accepts and refuses follows.
func TestParameterSchema(t *testing.T) {
	no := false
	schema := ParameterSchema([]Parameter{
		{Name: "base_url", Type: "string", Description: "where"},
		{Name: "limit", Type: "integer", Required: &no, Default: json.RawMessage(`10`)},
		{Name: "mode", Type: "string", Required: &no, Enum: []any{"fast", "slow"}},
		{Name: "tags", Type: "array", Required: &no, ItemsType: "string"},
		{Name: "ids", Type: "array", Required: &no, Items: json.RawMessage(`{"type":"integer"}`)},
	})
	if _, err := compileSchema(schema); err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	for args, want := range map[string]bool{
		`{"base_url":"u"}`: true,
		`{"base_url":"u","limit":3,"mode":"slow","tags":["a"],"ids":[1,2]}`: true,
		`{}`:                           false, // base_url is required
		`{"base_url":1}`:               false,
		`{"base_url":"u","mode":"x"}`:  false,
		`{"base_url":"u","tags":[1]}`:  false,
		`{"base_url":"u","ids":["a"]}`: false,
	} {
		if got := validateSchema(schema, args); got != want {
			t.Errorf("%s: valid %v, want %v (schema %s)", args, got, want, schema)
		}
	}
	if empty := ParameterSchema(nil); !validateSchema(empty, `{}`) {
		t.Fatalf("a tool without parameters refuses {}: %s", empty)
	}
}
