package tokens

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
	Now    func() time.Time
}

// Verifier checks sampling and storage tokens.
type Verifier struct {
	keys    KeyResolver
	opts    VerifierOptions
	parsers map[string]*jwt.Parser // by required audience
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	v := &Verifier{keys: keys, opts: opts, parsers: map[string]*jwt.Parser{}}
	for _, aud := range []string{AudienceSampling, AudienceStorage} {
		v.parsers[aud] = jwt.NewParser(
			jwt.WithAudience(aud),
			jwt.WithIssuer(opts.Issuer),
			jwt.WithLeeway(opts.Leeway),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithTimeFunc(opts.Now),
			jwt.WithStrictDecoding(), // one encoding per token: no malleable trailing bits
		)
	}
	return v, nil
}

// VerifySampling verifies a sampling_token.
func (v *Verifier) VerifySampling(ctx context.Context, raw string) (*Claims, error) {
	return v.Verify(ctx, raw, AudienceSampling)
}

// VerifyStorage verifies a storage_token.
func (v *Verifier) VerifyStorage(ctx context.Context, raw string) (*Claims, error) {
	return v.Verify(ctx, raw, AudienceStorage)
}

// Verify checks raw for the given audience and returns its claims. The
// error is one of the package's sentinels (or a *ClaimError), never a
// message that quotes the token.
func (v *Verifier) Verify(ctx context.Context, raw, audience string) (*Claims, error) {
	p, ok := v.parsers[audience]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a token audience", ErrAudience, audience)
	}
	if len(raw) > maxTokenSize {
		return nil, ErrMalformed
	}
	c := &Claims{}
	_, err := p.ParseWithClaims(raw, c, func(t *jwt.Token) (any, error) {
		alg, _ := t.Header["alg"].(string)
		if alg != EdDSA && alg != ES256 {
			return nil, ErrAlgorithm
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, ErrUnknownKey
		}
		vk, err := v.keys.VerificationKey(ctx, kid)
		if err != nil {
			return nil, err
		}
		if vk.Algorithm != alg {
			return nil, ErrAlgorithm
		}
		return vk.Key, nil
	})
	if err != nil {
		return nil, classify(err)
	}
	return c, nil
}

// maxTokenSize bounds what the parser looks at; real tokens are < 1 KiB.
const maxTokenSize = 8 << 10

// classify maps a parser error to one reason, most specific first.
func classify(err error) error {
	var ce *ClaimError
	if errors.As(err, &ce) {
		return ce
	}
	for _, own := range []error{ErrAlgorithm, ErrUnknownKey, ErrKeysUnavailable} {
		if errors.Is(err, own) {
			return own
		}
	}
	for _, m := range []struct{ from, to error }{
		{jwt.ErrTokenMalformed, ErrMalformed},
		{jwt.ErrTokenUnverifiable, ErrAlgorithm}, // alg not implemented by the parser
		{jwt.ErrTokenSignatureInvalid, ErrSignature},
		{jwt.ErrTokenExpired, ErrExpired},
		{jwt.ErrTokenNotValidYet, ErrNotYetValid},
		{jwt.ErrTokenUsedBeforeIssued, ErrNotYetValid},
		{jwt.ErrTokenInvalidAudience, ErrAudience},
		{jwt.ErrTokenInvalidIssuer, ErrIssuer},
		{jwt.ErrTokenRequiredClaimMissing, ErrMissingClaim},
	} {
		if errors.Is(err, m.from) {
			return m.to
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return ErrMalformed
}
