package broker

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// decodeStrictly decodes doc as the config loader does: unknown keys
// are errors.
func decodeStrictly(doc string, v any) error {
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// Every YAML example in docs/broker.md that binds an intent still loads
// and validates, and every registered kind is documented by one: the
// config format is the operators', and a kind added without its docs
// fails here.
func TestDocumentedInjectExamples(t *testing.T) {
	md, err := os.ReadFile("../docs/broker.md")
	if err != nil {
		t.Fatal(err)
	}
	intents := map[string]Intent{}
	blocks := 0
	for _, part := range strings.Split(string(md), "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if !strings.Contains(block, "inject:") {
			continue
		}
		blocks++
		if strings.HasPrefix(block, "broker:") {
			var doc struct {
				Broker Config `yaml:"broker"`
			}
			if err := decodeStrictly(block, &doc); err != nil {
				t.Fatalf("example %d: %v\n%s", blocks, err, block)
			}
			for n, in := range doc.Broker.Intents {
				intents[n] = in
			}
			continue
		}
		// An intent shown on its own, indented as under broker.intents.
		var frag map[string]Intent
		if err := decodeStrictly(dedent(block), &frag); err != nil {
			t.Fatalf("example %d: %v\n%s", blocks, err, block)
		}
		for n, in := range frag {
			intents[n] = in
		}
	}
	if blocks < 5 {
		t.Fatalf("found %d examples with inject: in docs/broker.md", blocks)
	}
	cfg := Config{Intents: intents}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("documented intents do not validate: %v", err)
	}
	shown := map[string]bool{}
	for name, in := range cfg.Intents {
		if in.Inject.Kind == nil && !in.Secret.isZero() {
			t.Errorf("intent %s: bound to a secret with no kind", name)
		}
		shown[in.Inject.Name()] = true
	}
	for _, k := range InjectKinds() {
		if !shown[k] {
			t.Errorf("inject kind %q has no example in docs/broker.md", k)
		}
	}
}

func dedent(block string) string {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(block, "\n") {
		b.WriteString(strings.TrimPrefix(line, "    "))
	}
	return b.String()
}

func TestInjectYAML(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      string // the kind, or part of the error
		ok        bool
	}{
		{"one kind", `{header: {name: X-Key, template: "{{secret}}"}}`, "header", true},
		{"kind without settings", `{placeholder: }`, "placeholder", true},
		{"empty: unbound", `{}`, "", true},
		{"two kinds", `{header: {name: X-Key, template: "{{secret}}"}, query: {name: k}}`, "exactly one kind", false},
		{"unknown kind", `{bearer_magic: {name: x}}`, `unknown kind "bearer_magic"`, false},
		{"unknown setting", "\n\n{header: {name: X-Key, template: \"{{secret}}\", tmpl: x}}", "line 3: field tmpl not found", false},
		{"not a mapping", `[header]`, "a mapping with one kind", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in Inject
			err := decodeStrictly(tc.doc, &in)
			switch {
			case tc.ok && err != nil:
				t.Fatal(err)
			case tc.ok && in.Name() != tc.want:
				t.Fatalf("kind %q, want %q", in.Name(), tc.want)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if !tc.ok {
				return
			}
			// What is written reads back as the same kind and settings.
			out, err := yaml.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			var back Inject
			if err := decodeStrictly(string(out), &back); err != nil || back.Name() != in.Name() {
				t.Fatalf("round trip %q: %v %q", out, err, back.Name())
			}
		})
	}
}

// A config built in Go with a kind nobody registered is refused by
// Validate, as the decoder refuses its name.
func TestUnregisteredKindRefused(t *testing.T) {
	cfg := testConfig("/dev/null")
	cfg.Intents = map[string]Intent{"x": {Class: ClassRead, Secret: SecretRef{Source: SourceFile, Path: "a", Field: "b"},
		Inject: Inject{Kind: unregisteredKind{}}}}
	if err := cfg.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), `kind "unregistered" is not registered`) {
		t.Fatalf("err = %v", err)
	}
}

type unregisteredKind struct{}

func (unregisteredKind) Kind() string                            { return "unregistered" }
func (k unregisteredKind) WithDefaults() InjectKind              { return k }
func (unregisteredKind) Validate(string, Intent) []error         { return nil }
func (unregisteredKind) CompleteSecret(s Secret) (Secret, error) { return s, nil }

func TestRegisterInjectKindRefusesMistakes(t *testing.T) {
	for name, reg := range map[string]func(){
		"duplicate":  func() { RegisterInjectKind("header", func() InjectKind { return new(HeaderInject) }) },
		"bad name":   func() { RegisterInjectKind("Header!", func() InjectKind { return new(HeaderInject) }) },
		"name clash": func() { RegisterInjectKind("header2", func() InjectKind { return new(HeaderInject) }) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			reg()
		})
	}
}

// The inject block's decoder (one key looked up in the table, settings
// decoded strictly, line numbers shifted) never panics; what it accepts
// is a registered kind or none, and reads back the same once written.
func FuzzInjectYAML(f *testing.F) {
	f.Add([]byte(`{placeholder: }`))
	f.Add([]byte("hmac:\n  header: X-Sig\n  template: \"v1={{signature}}\"\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var in Inject
		if err := decodeStrictly(string(doc), &in); err != nil {
			return
		}
		if in.Kind == nil {
			return
		}
		if _, ok := NewInjectKind(in.Name()); !ok {
			t.Fatalf("decoded an unregistered kind %q", in.Name())
		}
		_ = in.validate("inject", Intent{}) // must not panic
		out, err := yaml.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var back Inject
		if err := decodeStrictly(string(out), &back); err != nil || back.Name() != in.Name() {
			t.Fatalf("%q read back as %q: %v", out, back.Name(), err)
		}
	})
}
