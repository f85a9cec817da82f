package executa

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/strictjson"
)

// Manifest is the result of describe.
type Manifest struct {
	// Name is optional: the host knows a plugin by its configured name.
	// When present and different, it is kept (and recorded at launch).
	Name        string `json:"name,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Author      string `json:"author,omitempty"`
	Homepage    string `json:"homepage,omitempty"`
	Icon        string `json:"icon,omitempty"`
	Category    string `json:"category,omitempty"`
	License     string `json:"license,omitempty"`
	// Runtime is metadata: a string ("python") or, as the SDKs write it,
	// an object ({"type": "uv", "min_version": "0.1.0"}).
	Runtime          Runtime      `json:"runtime,omitzero"`
	HostCapabilities []string     `json:"host_capabilities,omitempty"`
	Tools            []Tool       `json:"tools"`
	Credentials      []Credential `json:"credentials,omitempty"`
}

// Tool is one invocable tool.
type Tool struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Parameters  []Parameter `json:"parameters,omitempty"`
	Timeout     int         `json:"timeout,omitempty"` // seconds; 60 when 0
	Streaming   bool        `json:"streaming,omitempty"`
}

// Parameter is one tool argument.
type Parameter struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Description string          `json:"description,omitempty"`
	Required    *bool           `json:"required,omitempty"` // default true
	Default     json.RawMessage `json:"default,omitempty"`
	Enum        []any           `json:"enum,omitempty"`
	Items       json.RawMessage `json:"items,omitempty"`
	ItemsType   string          `json:"items_type,omitempty"`
}

// Credential is a declared credential. A sensitive one is brokered (the
// plugin gets a handle); a non-sensitive one is a setting with a plain
// value from the host's config, or its Default.
type Credential struct {
	Name        string `json:"name"`
	DisplayName string `json:"display_name,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Sensitive is true unless the manifest says false: a credential
	// whose nature is not stated is treated as a secret.
	Sensitive *bool `json:"sensitive,omitempty"`
	// Default is the value of a setting the operator did not set; a
	// string, number or boolean (delivered as its JSON text).
	Default json.RawMessage `json:"default,omitempty"`
}

// IsSensitive reports whether the credential must be brokered.
func (c Credential) IsSensitive() bool { return c.Sensitive == nil || *c.Sensitive }

// DefaultString is Default as the string a plugin receives: a JSON string
// unquoted, any other scalar as written; "" when absent or not a scalar.
func (c Credential) DefaultString() string {
	var s string
	if json.Unmarshal(c.Default, &s) == nil {
		return s
	}
	var v any
	if json.Unmarshal(c.Default, &v) != nil {
		return ""
	}
	switch v.(type) {
	case float64, bool:
		return string(c.Default)
	}
	return ""
}

// Runtime is the manifest's runtime: kept as metadata, never acted on.
type Runtime struct {
	Type string          // "python", "uv", "npm", "binary", …
	Raw  json.RawMessage // the declaration as sent
}

// IsZero reports an absent runtime.
func (r Runtime) IsZero() bool { return len(r.Raw) == 0 }

// UnmarshalJSON accepts a string or an object with a "type".
func (r *Runtime) UnmarshalJSON(b []byte) error {
	r.Raw = append(json.RawMessage(nil), b...)
	if string(b) == "null" {
		r.Raw = nil
		return nil
	}
	if json.Unmarshal(b, &r.Type) == nil {
		return nil
	}
	var obj struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return errors.New("runtime: must be a string or an object")
	}
	r.Type = obj.Type
	return nil
}

// MarshalJSON writes the declaration back as sent.
func (r Runtime) MarshalJSON() ([]byte, error) {
	if len(r.Raw) == 0 {
		return []byte("null"), nil
	}
	return r.Raw, nil
}

// Host capability strings.
const (
	CapSample = "llm.sample"
	CapKV     = "aps.kv"
	CapFiles  = "aps.files"
)

var (
	semver    = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	toolName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)
	credName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	paramType = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "array": true, "object": true}
)

// MaxToolTimeout bounds a tool's declared timeout.
const MaxToolTimeout = 3600

// ParseManifest decodes and validates a describe result, reporting every
// problem at once. Names in messages are the manifest's own keys.
func ParseManifest(raw json.RawMessage) (*Manifest, error) {
	m := &Manifest{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, decodeError(err)
	}
	if err := strictjson.Check(raw); err != nil {
		return nil, fmt.Errorf("describe result: %w", err)
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !semver.MatchString(m.Version) {
		add("version: must be SemVer")
	}
	for i, c := range m.HostCapabilities {
		switch {
		case c == CapSample || c == CapKV || c == CapFiles || strings.HasPrefix(c, "aps.scope."):
		case c == "storage.user" || c == "storage.app" || c == "storage.tool":
			add("host_capabilities[%d]: storage.user, storage.app and storage.tool are not valid capabilities: storage scopes are a platform constant carried by the storage_token; declare aps.kv (and aps.files) instead", i)
		default:
			add("host_capabilities[%d]: unknown capability (llm.sample, aps.kv, aps.files, aps.scope.*)", i)
		}
	}
	if len(m.Tools) == 0 {
		add("tools: at least one tool is required")
	}
	seen := map[string]bool{}
	for i, t := range m.Tools {
		if !toolName.MatchString(t.Name) || seen[t.Name] {
			add("tools[%d].name: missing, repeated or not an identifier", i)
		}
		seen[t.Name] = true
		if t.Timeout < 0 || t.Timeout > MaxToolTimeout {
			add("tools[%d].timeout: must be between 0 and %d seconds", i, MaxToolTimeout)
		}
		for j, p := range t.Parameters {
			if p.Name == "" {
				add("tools[%d].parameters[%d].name: required", i, j)
			}
			if !paramType[p.Type] {
				add("tools[%d].parameters[%d].type: must be string, integer, number, boolean, array or object", i, j)
			}
		}
	}
	for i, c := range m.Credentials {
		if !credName.MatchString(c.Name) {
			add("credentials[%d].name: must be an identifier", i)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Tool returns a tool by name.
func (m *Manifest) Tool(name string) (Tool, bool) {
	for _, t := range m.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Has reports whether the manifest declares capability c.
func (m *Manifest) Has(c string) bool { return slices.Contains(m.HostCapabilities, c) }

// wantsStorageToken is the one predicate the mint gate and every storage
// validation share: aps.kv, aps.files, or any aps.scope.* declaration.
func (m *Manifest) wantsStorageToken() bool {
	for _, c := range m.HostCapabilities {
		if c == CapKV || c == CapFiles || strings.HasPrefix(c, "aps.scope.") {
			return true
		}
	}
	return false
}

// decodeError names the field a describe result got wrong, never its
// value (which is the plugin's).
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: must be %s", te.Field, jsonKind(te.Type.Kind().String()))
	case errors.As(err, &te):
		return errors.New("describe result: must be a JSON object (the manifest itself)")
	case errors.As(err, &se):
		return errors.New("describe result: not valid JSON")
	default:
		// Errors of our own UnmarshalJSON name their field already.
		return err
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "float64":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "of another type"
}
