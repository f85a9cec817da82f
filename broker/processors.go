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
	// minutes, until the API accepts a token.
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
	DefaultTokenSkew      = 60 * time.Second
	DefaultRefreshBackoff = time.Second
)

// Processor names an inject kind that is a processor ("" for the static
// kinds), for audit lines and metrics.
func (i Inject) Processor() string {
	switch {
	case i.HMAC != nil:
		return "hmac"
	case i.AWSSigV4 != nil:
		return "aws_sigv4"
	case i.OAuth2ClientCredentials != nil:
		return "oauth2_client_credentials"
	case i.OAuth2JWTBearer != nil:
		return "oauth2_jwt_bearer"
	}
	return ""
}

// Token returns the shared token settings of a token processor, with
// defaults; nil for other kinds.
func (i Inject) Token() *TokenInject {
	var t TokenInject
	switch {
	case i.OAuth2ClientCredentials != nil:
		t = i.OAuth2ClientCredentials.TokenInject
	case i.OAuth2JWTBearer != nil:
		t = i.OAuth2JWTBearer.TokenInject
	default:
		return nil
	}
	if t.Header == "" {
		t.Header = "Authorization"
	}
	if t.Template == "" {
		t.Template = "Bearer " + TokenPlaceholder
	}
	if t.Skew == 0 {
		t.Skew = DefaultTokenSkew
	}
	if t.RefreshBackoff == 0 {
		t.RefreshBackoff = DefaultRefreshBackoff
	}
	return &t
}

// validateProcessor checks a processor kind's settings, and a token
// endpoint against the intent's destinations.
func (i Inject) validateProcessor(p string, dests []Destination) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case i.HMAC != nil:
		h := i.HMAC
		if h.Algorithm != "" && h.Algorithm != "sha256" && h.Algorithm != "sha512" {
			add("%s.hmac.algorithm: sha256 or sha512", p)
		}
		if h.Encoding != "" && h.Encoding != "hex" && h.Encoding != "base64" {
			add("%s.hmac.encoding: hex or base64", p)
		}
		if !isToken(h.Header) || isHopByHopOrProxy(h.Header) {
			add("%s.hmac.header: must be an end-to-end header name", p)
		}
		if h.Template != "" && strings.Count(h.Template, SignaturePlaceholder) != 1 || strings.ContainsAny(h.Template, "\r\n\x00") {
			add("%s.hmac.template: must contain %s exactly once, and no CR, LF or NUL", p, SignaturePlaceholder)
		}
		if h.TimestampHeader != "" && (!isToken(h.TimestampHeader) || isHopByHopOrProxy(h.TimestampHeader)) {
			add("%s.hmac.timestamp_header: must be an end-to-end header name", p)
		}
	case i.AWSSigV4 != nil:
		for _, f := range [...]struct{ name, v string }{{"region", i.AWSSigV4.Region}, {"service", i.AWSSigV4.Service}} {
			if strings.ContainsAny(f.v, "/ \r\n\x00") {
				add("%s.aws_sigv4.%s: must be a plain name", p, f.name)
			}
		}
	case i.OAuth2ClientCredentials != nil:
		c := i.OAuth2ClientCredentials
		if (c.ClientID == "") == (c.ClientIDField == "") {
			add("%s.oauth2_client_credentials: exactly one of client_id, client_id_field", p)
		}
		if c.AuthStyle != "" && c.AuthStyle != "header" && c.AuthStyle != "params" {
			add("%s.oauth2_client_credentials.auth_style: header or params", p)
		}
		errs = append(errs, c.TokenInject.validate(p+".oauth2_client_credentials", dests)...)
	case i.OAuth2JWTBearer != nil:
		j := i.OAuth2JWTBearer
		if j.Issuer != "" && j.IssuerField != "" {
			add("%s.oauth2_jwt_bearer: at most one of issuer, issuer_field", p)
		}
		errs = append(errs, j.TokenInject.validate(p+".oauth2_jwt_bearer", dests)...)
	}
	return errs
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
