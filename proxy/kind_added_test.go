package proxy

import (
	"fmt"
	"net/http"

	"github.com/airlock-dev/airlock/broker"
)

// This file is the whole of a new inject kind, as a test: its settings,
// their validation, its injector, its registration and its walk. Adding
// a kind needs this one file (plus docs/broker.md for a shipped kind);
// TestEveryKindEndToEnd walks it with the built-in ones.

// digestHeaderInject sends the secret's SHA-256 (hex) in a header.
type digestHeaderInject struct {
	Header string `yaml:"header"`
}

func (*digestHeaderInject) Kind() string { return "test_digest_header" }

func (d *digestHeaderInject) WithDefaults() broker.InjectKind {
	c := *d
	if c.Header == "" {
		c.Header = "X-Digest"
	}
	return &c
}

func (d *digestHeaderInject) Validate(p string, _ broker.Intent) []error {
	if badHeaderValue(d.Header) || d.Header == "" {
		return []error{fmt.Errorf("%s.header: a header name", p)}
	}
	return nil
}

func (*digestHeaderInject) CompleteSecret(s broker.Secret) (broker.Secret, error) { return s, nil }

func init() {
	broker.RegisterInjectKind("test_digest_header", func() broker.InjectKind { return new(digestHeaderInject) })
	registerInjector("test_digest_header", kindFuncs[*digestHeaderInject]{
		onInject: func(r *http.Request, k *digestHeaderInject, s broker.Secret, _ string) (*echoForms, *denial) {
			digest := hexSHA([]byte(s.Value))
			r.Header.Set(k.Header, digest)
			return cachedForms(formsKey{secret: s.Value, derived: digest}, func() []string { return secretForms(s.Value, digest) }), nil
		}})
	kindCases["test_digest_header"] = kindCase{settings: `{}`,
		check: func(r *http.Request, _ []byte, secret string) error {
			return want(r.Header.Get("X-Digest") == hexSHA([]byte(secret)), "X-Digest")
		}}
}
