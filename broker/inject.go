package broker

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// InjectKind is the settings of one inject kind: how the proxy applies
// an intent's secret (header, basic, hmac, …). Each kind is one type,
// registered by its config name with RegisterInjectKind; the config's
// `inject:` block names exactly one. The proxy applies a kind through an
// injector it registers under the same name, and refuses a request whose
// kind it has no injector for.
type InjectKind interface {
	// Kind is the kind's key in the config ("header").
	Kind() string
	// WithDefaults returns the settings with zero fields set to their
	// defaults; the receiver is not changed.
	WithDefaults() InjectKind
	// Validate returns every problem with the settings. p is the config
	// path of the kind's block ("broker.intents.x.inject.header"); in is
	// the whole binding (a token endpoint must be among its
	// destinations).
	Validate(p string, in Intent) []error
	// CompleteSecret returns s with the parts the kind reads from other
	// fields of the secret filled in (basic: the user name); an error
	// names the field, never its value.
	CompleteSecret(s Secret) (Secret, error)
}

// Inject says how the proxy applies an intent's secret: one kind, as
// `inject: {<kind>: {…settings…}}` in the config. A nil Kind is an intent
// not bound yet.
type Inject struct {
	Kind InjectKind
}

// Name names the kind, for logs, audit lines and metrics ("" when unbound).
func (i Inject) Name() string {
	if i.Kind == nil {
		return ""
	}
	return i.Kind.Kind()
}

var (
	injectKindsMu sync.RWMutex
	injectKinds   = map[string]func() InjectKind{}
	kindName      = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// RegisterInjectKind makes a kind known to the config decoder by name;
// newKind returns zero settings of the kind. Call it from an init
// function: it panics on a malformed or duplicate name, or on settings
// whose Kind differs (a wiring mistake, not a runtime condition).
func RegisterInjectKind(name string, newKind func() InjectKind) {
	if !kindName.MatchString(name) || newKind == nil || newKind().Kind() != name {
		panic("broker: RegisterInjectKind: bad kind " + strconv.Quote(name))
	}
	injectKindsMu.Lock()
	defer injectKindsMu.Unlock()
	if _, dup := injectKinds[name]; dup {
		panic("broker: RegisterInjectKind: kind " + strconv.Quote(name) + " registered twice")
	}
	injectKinds[name] = newKind
}

// InjectKinds returns the registered kind names, sorted.
func InjectKinds() []string {
	injectKindsMu.RLock()
	defer injectKindsMu.RUnlock()
	names := make([]string, 0, len(injectKinds))
	for n := range injectKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewInjectKind returns zero settings of the named kind.
func NewInjectKind(name string) (InjectKind, bool) {
	injectKindsMu.RLock()
	newKind, ok := injectKinds[name]
	injectKindsMu.RUnlock()
	if !ok {
		return nil, false
	}
	return newKind(), true
}

// UnmarshalYAML decodes `{<kind>: {…}}`: one key naming a registered
// kind, its settings decoded strictly (unknown keys are errors, as
// everywhere in the config).
func (i *Inject) UnmarshalYAML(n *yaml.Node) error {
	fail := func(line int, format string, a ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: inject: ", line) + fmt.Sprintf(format, a...)}}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		*i = Inject{}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fail(n.Line, "a mapping with one kind (%s)", strings.Join(InjectKinds(), ", "))
	}
	switch len(n.Content) / 2 {
	case 0:
		*i = Inject{}
		return nil
	case 1:
	default:
		return fail(n.Line, "exactly one kind, not several (%s)", strings.Join(InjectKinds(), ", "))
	}
	key, val := n.Content[0], n.Content[1]
	k, ok := NewInjectKind(key.Value)
	if !ok {
		// The key is the operator's own config, not a plugin's value.
		return fail(key.Line, "unknown kind %q: one of %s", key.Value, strings.Join(InjectKinds(), ", "))
	}
	if !(val.Kind == yaml.ScalarNode && val.Tag == "!!null") {
		if err := decodeStrict(val, k); err != nil {
			return err
		}
	}
	i.Kind = k
	return nil
}

// MarshalYAML writes the form UnmarshalYAML reads.
func (i Inject) MarshalYAML() (any, error) {
	if i.Kind == nil {
		return map[string]any{}, nil
	}
	return map[string]any{i.Kind.Kind(): i.Kind}, nil
}

// decodeStrict decodes n into v rejecting unknown keys (a Node's own
// Decode does not), with line numbers of the original document.
func decodeStrict(n *yaml.Node, v any) error {
	doc, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	err = dec.Decode(v)
	te, ok := err.(*yaml.TypeError)
	if !ok {
		return err
	}
	// The re-encoded block starts at n: shift its line numbers there.
	out := &yaml.TypeError{Errors: make([]string, len(te.Errors))}
	for j, e := range te.Errors {
		out.Errors[j] = e
		var line int
		if rest, ok := strings.CutPrefix(e, "line "); ok {
			num, tail, _ := strings.Cut(rest, ":")
			if line, err = strconv.Atoi(num); err == nil {
				out.Errors[j] = "line " + strconv.Itoa(n.Line+line-1) + ":" + tail
			}
		}
	}
	return out
}

// validate checks the binding's kind; an unbound intent with a secret is
// a problem (an intent without either is declared but not bound yet).
func (i Inject) validate(p string, in Intent) []error {
	if i.Kind == nil {
		return []error{fmt.Errorf("%s: exactly one of %s", p, strings.Join(InjectKinds(), ", "))}
	}
	if _, ok := NewInjectKind(i.Kind.Kind()); !ok {
		return []error{fmt.Errorf("%s: kind %q is not registered", p, i.Kind.Kind())}
	}
	return i.Kind.Validate(p+"."+i.Kind.Kind(), in)
}
