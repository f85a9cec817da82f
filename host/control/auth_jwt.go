package control

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/tokens"
)

// JWT verification defaults and bounds.
const (
	DefaultJWTLeeway      = 30 * time.Second
	MaxJWTLeeway          = 5 * time.Minute
	DefaultPrincipalClaim = "sub"
	// maxJWT bounds a bearer JWT: larger ones are refused unparsed.
	maxJWT = 16 << 10
	// minRSABits: a shorter RSA key verifies nothing.
	minRSABits = 2048
)

// JWTAlgorithms are the only signature algorithms a bearer JWT may use:
// "none" and the HMAC family (whose key would be the issuer's public
// key, which anyone has) are refused before any key is looked at.
var JWTAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// errJWT marks every refusal of a bearer JWT.
var errJWT = errors.New("JWT refused")

// JWTOptions configure a JWTVerifier (host.control_principals.jwt).
type JWTOptions struct {
	// Issuer is the required iss, exactly.
	Issuer string
	// Audience must be one of the token's aud values; required.
	Audience string
	// Keys is the issuer's JWKS (NewJWKS).
	Keys *JWKS
	// PrincipalClaim names the claim that names the principal; "sub"
	// when empty. Its value must be a non-empty string.
	PrincipalClaim string
	// Attributes are claims passed to the policy as the principal's
	// attributes (a string as it is, other values as JSON).
	Attributes []string
	// Leeway is the clock skew allowed on exp, nbf and iat;
	// DefaultJWTLeeway when zero, at most MaxJWTLeeway.
	Leeway time.Duration
	Now    func() time.Time
}

// JWTVerifier authenticates bearer JWTs of one OIDC issuer. Make it with
// NewJWTVerifier; it is safe for concurrent use.
type JWTVerifier struct{ o JWTOptions }

// NewJWTVerifier checks o and returns its verifier.
func NewJWTVerifier(o JWTOptions) (*JWTVerifier, error) {
	var errs []error
	if o.Issuer == "" {
		errs = append(errs, errors.New("issuer: required"))
	}
	if o.Audience == "" {
		errs = append(errs, errors.New("audience: required (a token meant for another service must not pass)"))
	}
	if o.Keys == nil {
		errs = append(errs, errors.New("jwks_url or jwks_file: required"))
	}
	if o.PrincipalClaim == "" {
		o.PrincipalClaim = DefaultPrincipalClaim
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultJWTLeeway
	}
	if o.Leeway < 0 || o.Leeway > MaxJWTLeeway {
		errs = append(errs, fmt.Errorf("leeway: must be between 0 and %s", MaxJWTLeeway))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &JWTVerifier{o: o}, nil
}

// JWTPrincipalID is the principal ID of a JWT's subject:
// "jwt:<issuer>#<principal claim>", so that two issuers' subjects, and a
// subject and a configured name, never meet.
func JWTPrincipalID(issuer, subject string) string { return "jwt:" + issuer + "#" + subject }

// looksLikeJWT: three base64url segments, as a compact JWS has.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 }

// Verify checks a compact JWS and returns its principal: allowed
// algorithm, a key of the issuer's JWKS, signature, iss, aud, exp
// (required), nbf and iat. Its errors name the check, never the token.
func (v *JWTVerifier) Verify(ctx context.Context, raw string) (host.Principal, error) {
	fail := func(err error) (host.Principal, error) { return host.Principal{}, fmt.Errorf("%w: %w", errJWT, err) }
	if len(raw) > maxJWT {
		return fail(tokens.ErrMalformed)
	}
	if !allowedAlgorithm(raw) {
		return fail(tokens.ErrAlgorithm)
	}
	tok, err := jwt.ParseSigned(raw, JWTAlgorithms)
	if err != nil {
		return fail(tokens.ErrMalformed)
	}
	if len(tok.Headers) != 1 {
		return fail(tokens.ErrMalformed)
	}
	hdr := tok.Headers[0]
	keys, err := v.o.Keys.lookup(ctx, hdr.KeyID)
	if err != nil {
		return fail(err)
	}
	var std jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if !keyFits(k, hdr.Algorithm) {
			continue
		}
		if err := tok.Claims(k.Key, &std, &all); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		if len(keys) == 0 {
			return fail(tokens.ErrUnknownKey)
		}
		return fail(tokens.ErrSignature)
	}
	if std.Expiry == nil {
		return fail(fmt.Errorf("%w: exp", tokens.ErrMissingClaim))
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: v.o.Issuer, AnyAudience: jwt.Audience{v.o.Audience}, Time: v.o.Now()}, v.o.Leeway)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return fail(tokens.ErrExpired)
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return fail(tokens.ErrNotYetValid)
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return fail(tokens.ErrIssuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return fail(tokens.ErrAudience)
	case err != nil:
		return fail(tokens.ErrBadClaim)
	}
	sub, _ := all[v.o.PrincipalClaim].(string)
	if sub == "" || len(sub) > 256 || strings.ContainsFunc(sub, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fail(fmt.Errorf("%w: %s (a non-empty string of printable characters)", tokens.ErrMissingClaim, v.o.PrincipalClaim))
	}
	attrs := map[string]string{"issuer": v.o.Issuer}
	for _, name := range v.o.Attributes {
		switch val := all[name].(type) {
		case nil:
		case string:
			attrs[name] = val
		default:
			b, _ := json.Marshal(val)
			attrs[name] = string(b)
		}
	}
	return host.Principal{ID: JWTPrincipalID(v.o.Issuer, sub), Method: MethodJWT, Attributes: attrs}, nil
}

// keyFits: a key verifies only the algorithm of its type, and the one
// its JWK names when it names one; it is a signing key.
func keyFits(k jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg || k.Use != "" && k.Use != "sig" {
		return false
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return alg == string(jose.RS256) && pub.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey:
		return alg == string(jose.ES256) && pub.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == string(jose.EdDSA)
	}
	return false
}

// allowedAlgorithm reads the alg of a compact JWS's header, so that a
// refused algorithm is reported as such (a header that does not decode is
// left to the parser to call malformed).
func allowedAlgorithm(raw string) bool {
	seg, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return true
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &h) != nil {
		return true
	}
	return slices.Contains(JWTAlgorithms, jose.SignatureAlgorithm(h.Alg))
}
