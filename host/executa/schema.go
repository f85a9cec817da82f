package executa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkSchema applies the notes' JSON schema limits (size, depth, nodes)
// and that the schema compiles, before anything is sent to a backend.
func checkSchema(raw json.RawMessage) error {
	if len(raw) > MaxSchemaBytes {
		return fmt.Errorf("larger than %d bytes", MaxSchemaBytes)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return errors.New("not JSON")
	}
	nodes := 0
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		nodes++
		if nodes > MaxSchemaNodes {
			return fmt.Errorf("more than %d nodes", MaxSchemaNodes)
		}
		if depth > MaxSchemaDepth {
			return fmt.Errorf("deeper than %d", MaxSchemaDepth)
		}
		switch x := v.(type) {
		case map[string]any:
			for _, c := range x {
				if err := walk(c, depth+1); err != nil {
					return err
				}
			}
		case []any:
			for _, c := range x {
				if err := walk(c, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v, 1); err != nil {
		return err
	}
	if _, err := compileSchema(raw); err != nil {
		return errors.New("not a JSON Schema the host can apply")
	}
	return nil
}

// compileSchema compiles a plugin's schema with no access to the network
// or the file system: a $ref may only point inside the schema.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource("inline://schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("inline://schema.json")
}

type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New("external references are not loaded")
}

// validateSchema reports whether text is JSON that the schema accepts:
// what structuredValid claims.
func validateSchema(schema json.RawMessage, text string) bool {
	s, err := compileSchema(schema)
	if err != nil {
		return false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if err != nil {
		return false
	}
	return s.Validate(v) == nil
}

// isJSONObject is json_object's claim: the text is one JSON object.
func isJSONObject(text string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(text), &m) == nil
}
