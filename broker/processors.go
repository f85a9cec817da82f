package broker

import (
	"fmt"
	"strings"
	"time"
)

// Credential processors: inject kinds that derive what is sent from the
// secret instead of sending it as it is. The secret stays in Vault and
// the proxy; the plugin holds only its handle.

// HMACInject signs each request: an HMAC (SHA-256 or SHA-512) keyed with
// the secret over Message, put in Header by Template.
type HMACInject struct {
	// Algorithm: sha256 (default) or sha512.
	Algorithm string `yaml:"algorithm"`
	// Header receives Template with {{signature}} (and {{timestamp}})
	// replaced.
	Header   string `yaml:"header"`
	Template string `yaml:"template"` // default "{{signature}}"
	// Encoding of the signature: hex (default) or base64.
	Encoding string `yaml:"encoding"`
	// Message is what is signed (default "{{body}}"): a template of
	// {{method}}, {{path}} (path and query as sent), {{timestamp}},
	// {{body}} and {{body_sha256}} (hex), with \n for newlines.
	Message string `yaml:"message"`
	// TimestampHeader, when set, carries the signing time in Unix
	// seconds (the {{timestamp}} of the message).
	TimestampHeader string `yaml:"timestamp_header"`
}

// SigV4Inject signs each request with AWS Signature Version 4. The bound
// field is the secret access key; the access key id and an optional
// session token are fields of the same secret.
type SigV4Inject struct {
	// Region and Service; when empty, parsed from a host of the form
	// <service>.<region>.amazonaws.com (or <bucket>.s3.<region>…).
	Region  string `yaml:"region"`
	Service string `yaml:"service"`
	// AccessKeyIDField (default access_key_id) and SessionTokenField
	// (default session_token; optional in the secret).
	AccessKeyIDField  string `yaml:"access_key_id_field"`
	SessionTokenField string `yaml:"session_token_field"`
	// UnsignedPayload sends X-Amz-Content-Sha256: UNSIGNED-PAYLOAD (S3)
	// instead of hashing the body.
	UnsignedPayload bool `yaml:"unsigned_payload"`
}

// TokenInject is what the two OAuth2 processors share: where the access
// token is obtained and how it is sent.
type TokenInject struct {
	// TokenURL is the token endpoint: https, and covered by the intent's
	// own destinations.
	TokenURL string   `yaml:"token_url"`
	Scopes   []string `yaml:"scopes"`
	// Header (default Authorization) receives Template (default
	// "Bearer {{token}}").
	Header   string `yaml:"header"`
	Template string `yaml:"template"`
	// Skew: a cached token is renewed this long before it expires
	// (default 60s).
	Skew time.Duration `yaml:"skew"`
	// RefreshBackoff bounds the token fetches of an API that refuses
	// every token, or of a failing token endpoint (default 1s): the
	// first refusal or failure is retried at once, each further one
	// waits this long after the previous fetch, doubling up to 5
	// minutes, until the API accepts a token. While the endpoint is down
	// (unreachable, 5xx) the wait stays at this floor.
	RefreshBackoff time.Duration `yaml:"refresh_backoff"`
}

// OAuth2ClientCredentialsInject obtains an access token with the client
// credentials grant (RFC 6749 section 4.4). The bound field is the client
// secret; the client id is ClientID or the secret's ClientIDField.
type OAuth2ClientCredentialsInject struct {
	TokenInject   `yaml:",inline"`
	ClientID      string `yaml:"client_id"`
	ClientIDField string `yaml:"client_id_field"`
	// AuthStyle: header (HTTP Basic, default) or params (in the form).
	AuthStyle string `yaml:"auth_style"`
}

// OAuth2JWTBearerInject obtains an access token with the JWT bearer
// grant (RFC 7523): the bound field is a PEM private key (RSA or EC
// P-256) that signs the assertion, RS256 or ES256.
type OAuth2JWTBearerInject struct {
	TokenInject `yaml:",inline"`
	// Issuer (iss) is IssuerField of the secret (default client_email,
	// as in a Google service account key) or this literal.
	Issuer      string `yaml:"issuer"`
	IssuerField string `yaml:"issuer_field"`
	// Subject (sub; default the issuer), Audience (aud; default the
	// token URL).
	Subject  string `yaml:"subject"`
	Audience string `yaml:"audience"`
	// KeyIDField (default private_key_id; optional in the secret) names
	// the kid header.
	KeyIDField string `yaml:"key_id_field"`
}

// Defaults of the processors.
const (
	TokenPlaceholder      = "{{token}}"
	SignaturePlaceholder  = "{{signature}}"
	defaultTokenSkew      = 60 * time.Second
	defaultRefreshBackoff = time.Second
)

func init() {
	RegisterInjectKind("hmac", func() InjectKind { return new(HMACInject) })
	RegisterInjectKind("aws_sigv4", func() InjectKind { return new(SigV4Inject) })
	RegisterInjectKind("oauth2_client_credentials", func() InjectKind { return new(OAuth2ClientCredentialsInject) })
	RegisterInjectKind("oauth2_jwt_bearer", func() InjectKind { return new(OAuth2JWTBearerInject) })
}

var (
	_ InjectKind = (*HMACInject)(nil)
	_ InjectKind = (*SigV4Inject)(nil)
	_ InjectKind = (*OAuth2ClientCredentialsInject)(nil)
	_ InjectKind = (*OAuth2JWTBearerInject)(nil)
)

func (*HMACInject) Kind() string                    { return "hmac" }
func (*SigV4Inject) Kind() string                   { return "aws_sigv4" }
func (*OAuth2ClientCredentialsInject) Kind() string { return "oauth2_client_credentials" }
func (*OAuth2JWTBearerInject) Kind() string         { return "oauth2_jwt_bearer" }

func (h *HMACInject) WithDefaults() InjectKind  { c := *h; return &c }
func (s *SigV4Inject) WithDefaults() InjectKind { c := *s; return &c }

func (o *OAuth2ClientCredentialsInject) WithDefaults() InjectKind {
	c := *o
	c.TokenInject = c.TokenInject.WithTokenDefaults()
	return &c
}

func (o *OAuth2JWTBearerInject) WithDefaults() InjectKind {
	c := *o
	c.TokenInject = c.TokenInject.WithTokenDefaults()
	return &c
}

// The processors read their other fields when they apply (a missing one
// is the proxy's secret_invalid), so the secret needs no completing.
func (*HMACInject) CompleteSecret(s Secret) (Secret, error)                    { return s, nil }
func (*SigV4Inject) CompleteSecret(s Secret) (Secret, error)                   { return s, nil }
func (*OAuth2ClientCredentialsInject) CompleteSecret(s Secret) (Secret, error) { return s, nil }
func (*OAuth2JWTBearerInject) CompleteSecret(s Secret) (Secret, error)         { return s, nil }

// WithTokenDefaults returns t with zero fields set to their defaults.
func (t TokenInject) WithTokenDefaults() TokenInject {
	if t.Header == "" {
		t.Header = "Authorization"
	}
	if t.Template == "" {
		t.Template = "Bearer " + TokenPlaceholder
	}
	if t.Skew == 0 {
		t.Skew = defaultTokenSkew
	}
	if t.RefreshBackoff == 0 {
		t.RefreshBackoff = defaultRefreshBackoff
	}
	return t
}

func (h *HMACInject) Validate(p string, _ Intent) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if h.Algorithm != "" && h.Algorithm != "sha256" && h.Algorithm != "sha512" {
		add("%s.algorithm: sha256 or sha512", p)
	}
	if h.Encoding != "" && h.Encoding != "hex" && h.Encoding != "base64" {
		add("%s.encoding: hex or base64", p)
	}
	if !isToken(h.Header) || isHopByHopOrProxy(h.Header) {
		add("%s.header: must be an end-to-end header name", p)
	}
	if h.Template != "" && strings.Count(h.Template, SignaturePlaceholder) != 1 || strings.ContainsAny(h.Template, "\r\n\x00") {
		add("%s.template: must contain %s exactly once, and no CR, LF or NUL", p, SignaturePlaceholder)
	}
	if h.TimestampHeader != "" && (!isToken(h.TimestampHeader) || isHopByHopOrProxy(h.TimestampHeader)) {
		add("%s.timestamp_header: must be an end-to-end header name", p)
	}
	return errs
}

func (s *SigV4Inject) Validate(p string, _ Intent) []error {
	var errs []error
	for _, f := range [...]struct{ name, v string }{{"region", s.Region}, {"service", s.Service}} {
		if strings.ContainsAny(f.v, "/ \r\n\x00") {
			errs = append(errs, fmt.Errorf("%s.%s: must be a plain name", p, f.name))
		}
	}
	return errs
}

func (c *OAuth2ClientCredentialsInject) Validate(p string, in Intent) []error {
	var errs []error
	if (c.ClientID == "") == (c.ClientIDField == "") {
		errs = append(errs, fmt.Errorf("%s: exactly one of client_id, client_id_field", p))
	}
	if c.AuthStyle != "" && c.AuthStyle != "header" && c.AuthStyle != "params" {
		errs = append(errs, fmt.Errorf("%s.auth_style: header or params", p))
	}
	return append(errs, c.TokenInject.validate(p, in.Destinations)...)
}

func (j *OAuth2JWTBearerInject) Validate(p string, in Intent) []error {
	var errs []error
	if j.Issuer != "" && j.IssuerField != "" {
		errs = append(errs, fmt.Errorf("%s: at most one of issuer, issuer_field", p))
	}
	return append(errs, j.TokenInject.validate(p, in.Destinations)...)
}

func (t TokenInject) validate(p string, dests []Destination) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if u, err := ParseDestination(t.TokenURL); err != nil {
		add("%s.token_url: must be an https:// URL without user info, query or fragment", p)
	} else if !coveredBy(dests, u) {
		add("%s.token_url: must be covered by the intent's own destinations (declare the token endpoint there)", p)
	}
	if t.Header != "" && (!isToken(t.Header) || isHopByHopOrProxy(t.Header)) {
		add("%s.header: must be an end-to-end header name", p)
	}
	if t.Template != "" && strings.Count(t.Template, TokenPlaceholder) != 1 || strings.ContainsAny(t.Template, "\r\n\x00") {
		add("%s.template: must contain %s exactly once, and no CR, LF or NUL", p, TokenPlaceholder)
	}
	for j, s := range t.Scopes {
		if s == "" || strings.ContainsAny(s, " \r\n\x00") {
			add("%s.scopes[%d]: one scope without spaces", p, j)
		}
	}
	if t.Skew < 0 || t.Skew > time.Hour {
		add("%s.skew: between 0 and 1h", p)
	}
	if t.RefreshBackoff < 0 || t.RefreshBackoff > time.Hour {
		add("%s.refresh_backoff: between 0 and 1h", p)
	}
	return errs
}

// coveredBy reports whether some destination covers u's host, port and
// path (u as ParseDestination makes it, normalized).
func coveredBy(ds []Destination, u Destination) bool {
	for _, d := range ds {
		n, err := d.Normalize()
		if err == nil && HostMatches(n.Host, u.Host) && n.Port == u.Port && PathMatches(n.PathPrefix, u.PathPrefix) {
			return true
		}
	}
	return false
}
