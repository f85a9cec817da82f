package tokens

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/airlock-dev/airlock/internal/strictjson"
)

// Defaults and bounds for VerifierOptions.
const (
	DefaultLeeway = 5 * time.Second
	// MaxLeeway bounds clock-skew tolerance: a larger leeway would let
	// expired tokens live on.
	MaxLeeway = 60 * time.Second
)

// VerificationKey is a public key and the one algorithm it verifies.
type VerificationKey struct {
	Algorithm string
	Key       crypto.PublicKey
}

// KeyResolver finds the verification key for a kid. *Ring and *JWKSClient
// implement it.
type KeyResolver interface {
	VerificationKey(ctx context.Context, kid string) (VerificationKey, error)
}

var (
	_ KeyResolver = (*Ring)(nil)
	_ KeyResolver = (*JWKSClient)(nil)
)

// VerifierOptions configure a Verifier.
type VerifierOptions struct {
	Issuer string        // required iss; DefaultIssuer
	Leeway time.Duration // clock-skew tolerance; DefaultLeeway, at most MaxLeeway
	// MaxLifetime refuses a token whose exp is further than this past
	// its iat: one the issuer (tokens.ttl) would never have minted, so a
	// signing key's holder cannot make a long-lived one. Zero: MaxTTL.
	MaxLifetime time.Duration
	Now         func() time.Time
}

// Verifier checks sampling and storage tokens. It parses the compact JWS
// itself (strict base64url, a fixed header struct, a flat claims struct)
// rather than through a generic JWT library: the checks are few and
// fixed, and the generic path cost more than the signature.
type Verifier struct {
	keys KeyResolver
	opts VerifierOptions
}

// NewVerifier returns a Verifier that resolves keys through keys.
func NewVerifier(keys KeyResolver, opts VerifierOptions) (*Verifier, error) {
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	if opts.Leeway < 0 || opts.Leeway > MaxLeeway {
		return nil, fmt.Errorf("verifier leeway must be between 0 and %s", MaxLeeway)
	}
	if opts.MaxLifetime == 0 {
		opts.MaxLifetime = MaxTTL
	}
	if opts.MaxLifetime < 0 || opts.MaxLifetime > MaxTTL {
		return nil, fmt.Errorf("verifier max lifetime must be between 1s and %s", MaxTTL)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Verifier{keys: keys, opts: opts}, nil
}

// VerifySampling verifies a sampling_token.
func (v *Verifier) VerifySampling(ctx context.Context, raw string) (*Claims, error) {
	return v.Verify(ctx, raw, AudienceSampling)
}

// VerifyStorage verifies a storage_token.
func (v *Verifier) VerifyStorage(ctx context.Context, raw string) (*Claims, error) {
	return v.Verify(ctx, raw, AudienceStorage)
}

// maxTokenSize bounds what the parser looks at; real tokens are < 1 KiB.
const maxTokenSize = 8 << 10

var b64 = base64.RawURLEncoding.Strict()

// jwsHeader is the protected header. Unknown members are ignored, except
// crit, whose presence means extensions we do not implement (RFC 7515
// section 4.1.11): such a token is refused.
type jwsHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Typ  *string         `json:"typ"`
	Crit json.RawMessage `json:"crit"`
}

// Verify checks raw for the given audience and returns its claims. The
// checks run in a fixed order — form, algorithm, key, signature, claim
// presence, lifetime, audience, issuer — and the error names the first
// that failed: one of the package's sentinels (or a *ClaimError), never a
// message that quotes the token.
func (v *Verifier) Verify(ctx context.Context, raw, audience string) (*Claims, error) {
	if audience != AudienceSampling && audience != AudienceStorage {
		return nil, fmt.Errorf("%w: %q is not a token audience", ErrAudience, audience)
	}
	if len(raw) > maxTokenSize || !compactJWS(raw) {
		return nil, ErrMalformed
	}
	dot1 := strings.IndexByte(raw, '.')
	dot2 := strings.LastIndexByte(raw, '.')
	if dot1 <= 0 || dot2 == dot1 || strings.IndexByte(raw[dot1+1:dot2], '.') >= 0 {
		return nil, ErrMalformed
	}
	var hdr jwsHeader
	if err := decodeSegment(raw[:dot1], &hdr, headerFields); err != nil {
		return nil, ErrMalformed
	}
	var wc wireClaims
	if err := decodeSegment(raw[dot1+1:dot2], &wc, claimFields); err != nil {
		return nil, ErrMalformed
	}
	if hdr.Alg != EdDSA && hdr.Alg != ES256 || len(hdr.Crit) > 0 {
		return nil, ErrAlgorithm
	}
	if hdr.Typ != nil && *hdr.Typ != "JWT" { // the issuer writes "JWT"
		return nil, ErrMalformed
	}
	if hdr.Kid == "" {
		return nil, ErrUnknownKey
	}
	vk, err := v.keys.VerificationKey(ctx, hdr.Kid)
	if err != nil {
		return nil, err
	}
	if vk.Algorithm != hdr.Alg {
		return nil, ErrAlgorithm
	}
	sig, err := b64.DecodeString(raw[dot2+1:])
	if err != nil || !verifyBytes(hdr.Alg, vk.Key, bytesOf(raw[:dot2]), sig) {
		return nil, ErrSignature
	}
	c, err := wc.claims()
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.ExpiresAt.Sub(c.IssuedAt.Time) > v.opts.MaxLifetime {
		return nil, ErrLifetime
	}
	now, leeway := v.opts.Now(), v.opts.Leeway
	if !now.Before(c.ExpiresAt.Add(leeway)) {
		return nil, ErrExpired
	}
	if c.NotBefore != nil && now.Add(leeway).Before(c.NotBefore.Time) || now.Add(leeway).Before(c.IssuedAt.Time) {
		return nil, ErrNotYetValid
	}
	if c.Audience() != audience {
		return nil, ErrAudience
	}
	if c.Issuer != v.opts.Issuer {
		return nil, ErrIssuer
	}
	return c, nil
}

// decodeSegment decodes a base64url JSON object into v, refusing
// duplicate and case-variant member names (strictjson.CheckObject).
func decodeSegment(seg string, v any, fields []string) error {
	buf := make([]byte, b64.DecodedLen(len(seg)))
	n, err := b64.Decode(buf, bytesOf(seg))
	if err != nil {
		return err
	}
	if err := strictjson.CheckObject(buf[:n], fields...); err != nil {
		return err
	}
	return json.Unmarshal(buf[:n], v)
}

// claims converts decoded wire claims, checking the forms of aud and the
// times.
func (w *wireClaims) claims() (*Claims, error) {
	c := &Claims{Binding: w.Binding, MaxTokensPerCall: w.MaxTokensPerCall, MaxCallsPerInvoke: w.MaxCallsPerInvoke,
		Scopes: w.Scopes, AppID: w.AppID, AppSlug: w.AppSlug}
	c.Issuer, c.ID = w.Issuer, w.ID
	switch a := bytes.TrimSpace(w.Audience); {
	case len(a) == 0 || string(a) == "null":
	case a[0] == '"':
		var s string
		if json.Unmarshal(a, &s) != nil {
			return nil, ErrMalformed
		}
		c.RegisteredClaims.Audience = jwt.ClaimStrings{s}
	case a[0] == '[':
		var ss []string
		if json.Unmarshal(a, &ss) != nil {
			return nil, ErrMalformed
		}
		c.RegisteredClaims.Audience = ss
	default:
		return nil, &ClaimError{Claim: "aud", Err: fmt.Errorf("%w: not a string or an array", ErrBadClaim)}
	}
	for _, t := range []struct {
		name string
		in   *float64
		out  **jwt.NumericDate
	}{{"exp", w.ExpiresAt, &c.ExpiresAt}, {"iat", w.IssuedAt, &c.IssuedAt}, {"nbf", w.NotBefore, &c.NotBefore}} {
		if t.in == nil {
			continue
		}
		if math.IsNaN(*t.in) || math.IsInf(*t.in, 0) || *t.in < 0 || *t.in > maxNumericDate {
			return nil, &ClaimError{Claim: t.name, Err: fmt.Errorf("%w: not a time", ErrBadClaim)}
		}
		sec, frac := math.Modf(*t.in)
		*t.out = jwt.NewNumericDate(time.Unix(int64(sec), int64(frac*1e9)))
	}
	return c, nil
}

// maxNumericDate is the year 9999: later times are not plausible tokens.
const maxNumericDate = 253402300799

// bytesOf views s as bytes without copying; callers only read it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
