package executa

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Manifest is the result of describe.
type Manifest struct {
	Name             string       `json:"name"`
	DisplayName      string       `json:"display_name,omitempty"`
	Version          string       `json:"version"`
	Description      string       `json:"description,omitempty"`
	Author           string       `json:"author,omitempty"`
	Homepage         string       `json:"homepage,omitempty"`
	Icon             string       `json:"icon,omitempty"`
	Category         string       `json:"category,omitempty"`
	License          string       `json:"license,omitempty"`
	Runtime          string       `json:"runtime,omitempty"`
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

// Credential is a declared credential.
type Credential struct {
	Name        string `json:"name"`
	DisplayName string `json:"display_name,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Sensitive   bool   `json:"sensitive,omitempty"`
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
		return nil, errors.New("describe result is not a manifest object")
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if m.Name == "" {
		add("name: required")
	}
	if !semver.MatchString(m.Version) {
		add("version: must be SemVer")
	}
	for i, c := range m.HostCapabilities {
		switch {
		case c == CapSample || c == CapKV || c == CapFiles || strings.HasPrefix(c, "aps.scope."):
		case c == "storage.user" || c == "storage.app" || c == "storage.tool":
			add("host_capabilities[%d]: %q is not a valid capability: storage scopes are a platform constant carried by the storage_token; declare aps.kv (and aps.files) instead", i, c)
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
func (m *Manifest) Has(c string) bool { return contains(m.HostCapabilities, c) }

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
