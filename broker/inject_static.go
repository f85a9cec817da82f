package broker

import (
	"fmt"
	"strings"
)

// The static inject kinds: the secret is sent as it is, in a header,
// as basic auth, in the query, or where the plugin put its handle.

func init() {
	RegisterInjectKind("header", func() InjectKind { return new(HeaderInject) })
	RegisterInjectKind("basic", func() InjectKind { return new(BasicInject) })
	RegisterInjectKind("query", func() InjectKind { return new(QueryInject) })
	RegisterInjectKind("placeholder", func() InjectKind { return new(PlaceholderInject) })
}

var (
	_ InjectKind = (*HeaderInject)(nil)
	_ InjectKind = (*BasicInject)(nil)
	_ InjectKind = (*QueryInject)(nil)
	_ InjectKind = (*PlaceholderInject)(nil)
)

// HeaderInject sets Name to Template with {{secret}} replaced.
type HeaderInject struct {
	Name     string `yaml:"name"`
	Template string `yaml:"template"`
}

// BasicInject sets HTTP basic auth. The password is the bound field; the
// user is Username, or the secret's UsernameField.
type BasicInject struct {
	Username      string `yaml:"username"`
	UsernameField string `yaml:"username_field"`
}

// QueryInject sets query parameter Name to the secret.
type QueryInject struct {
	Name string `yaml:"name"`
}

// PlaceholderInject swaps the handle for the secret where the plugin put
// it, in the named request headers (default: Authorization).
type PlaceholderInject struct {
	Headers []string `yaml:"headers"`
}

func (*HeaderInject) Kind() string      { return "header" }
func (*BasicInject) Kind() string       { return "basic" }
func (*QueryInject) Kind() string       { return "query" }
func (*PlaceholderInject) Kind() string { return "placeholder" }

func (h *HeaderInject) WithDefaults() InjectKind { c := *h; return &c }
func (b *BasicInject) WithDefaults() InjectKind  { c := *b; return &c }
func (q *QueryInject) WithDefaults() InjectKind  { c := *q; return &c }

func (ph *PlaceholderInject) WithDefaults() InjectKind {
	c := *ph
	if len(c.Headers) == 0 {
		c.Headers = []string{"Authorization"}
	}
	return &c
}

func (h *HeaderInject) Validate(p string, _ Intent) []error {
	var errs []error
	if !isToken(h.Name) || isHopByHopOrProxy(h.Name) {
		errs = append(errs, fmt.Errorf("%s.name: must be an end-to-end header name", p))
	}
	if strings.Count(h.Template, SecretPlaceholder) != 1 {
		errs = append(errs, fmt.Errorf("%s.template: must contain %s exactly once", p, SecretPlaceholder))
	}
	if strings.ContainsAny(h.Template, "\r\n\x00") {
		errs = append(errs, fmt.Errorf("%s.template: must not contain CR, LF or NUL", p))
	}
	return errs
}

func (b *BasicInject) Validate(p string, _ Intent) []error {
	var errs []error
	if (b.Username == "") == (b.UsernameField == "") {
		errs = append(errs, fmt.Errorf("%s: exactly one of username, username_field", p))
	}
	if strings.Contains(b.Username, ":") {
		errs = append(errs, fmt.Errorf("%s.username: must not contain ':'", p))
	}
	return errs
}

func (q *QueryInject) Validate(p string, _ Intent) []error {
	if q.Name == "" {
		return []error{fmt.Errorf("%s.name: required", p)}
	}
	return nil
}

func (ph *PlaceholderInject) Validate(p string, _ Intent) []error {
	var errs []error
	for j, h := range ph.Headers {
		if !isToken(h) || isHopByHopOrProxy(h) || strings.EqualFold(h, "Host") {
			errs = append(errs, fmt.Errorf("%s.headers[%d]: must be an end-to-end header name", p, j))
		}
	}
	return errs
}

func (*HeaderInject) CompleteSecret(s Secret) (Secret, error)      { return s, nil }
func (*QueryInject) CompleteSecret(s Secret) (Secret, error)       { return s, nil }
func (*PlaceholderInject) CompleteSecret(s Secret) (Secret, error) { return s, nil }

// CompleteSecret sets the user name: the literal, or the secret's field.
func (b *BasicInject) CompleteSecret(s Secret) (Secret, error) {
	s.Username = b.Username
	if f := b.UsernameField; f != "" {
		if s.Username = s.Fields[f]; s.Username == "" {
			return Secret{}, fmt.Errorf("%w (field %q)", ErrSecretFieldMissing, f)
		}
	}
	return s, nil
}
