package executa

import (
	"encoding/json"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
)

var _ host.ToolLister = (*runtime)(nil)

// Tools lists the manifest's tools, each with a JSON Schema built from
// its parameters. Executa states no risk class or side effect.
func (r *runtime) Tools() []host.Tool {
	m := r.p.Manifest
	out := make([]host.Tool, 0, len(m.Tools))
	for _, t := range m.Tools {
		out = append(out, host.Tool{Method: t.Name, Description: t.Description, InputSchema: ParameterSchema(t.Parameters),
			Risk: policy.RiskUnspecified})
	}
	return out
}

// ParameterSchema is the JSON Schema of a tool's arguments object: one
// property per parameter, of its type, with its description, enum,
// default and items; required unless the parameter says otherwise.
func ParameterSchema(params []Parameter) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, p := range params {
		s := map[string]any{"type": p.Type}
		if p.Description != "" {
			s["description"] = p.Description
		}
		if len(p.Enum) > 0 {
			s["enum"] = p.Enum
		}
		if len(p.Default) > 0 && json.Valid(p.Default) {
			s["default"] = p.Default
		}
		if p.Type == "array" {
			switch {
			case len(p.Items) > 0 && json.Valid(p.Items):
				s["items"] = p.Items
			case p.ItemsType != "":
				s["items"] = map[string]any{"type": p.ItemsType}
			}
		}
		props[p.Name] = s
		if p.Required == nil || *p.Required {
			required = append(required, p.Name)
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	return b
}
