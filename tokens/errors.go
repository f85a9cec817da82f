package tokens

import (
	"errors"
	"fmt"
)

// Verification failures. Each names the check that failed; none carries
// any part of the token.
var (
	// ErrMalformed: the token is not a well-formed compact JWS.
	ErrMalformed = errors.New("token is malformed")
	// ErrAlgorithm: the header's alg is not on the allowlist, or does not
	// match the algorithm of the key its kid names.
	ErrAlgorithm = errors.New("token algorithm is not allowed")
	// ErrUnknownKey: the kid is missing or names no key that may verify
	// (never seen, or retired past its grace).
	ErrUnknownKey = errors.New("token signing key is unknown")
	// ErrSignature: the signature does not verify.
	ErrSignature = errors.New("token signature is invalid")
	// ErrExpired: exp is in the past (beyond the leeway).
	ErrExpired = errors.New("token is expired")
	// ErrNotYetValid: nbf or iat is in the future (beyond the leeway).
	ErrNotYetValid = errors.New("token is not valid yet")
	// ErrAudience: aud is not the one the caller requires.
	ErrAudience = errors.New("token audience is wrong")
	// ErrIssuer: iss is not the configured issuer.
	ErrIssuer = errors.New("token issuer is wrong")
	// ErrMissingClaim: a required claim is absent; see [ClaimError].
	ErrMissingClaim = errors.New("token claim is missing")
	// ErrKeysUnavailable: the verification keys could not be fetched
	// (a JWKS endpoint did not answer); the token was not judged.
	ErrKeysUnavailable = errors.New("token verification keys are unavailable")
	// ErrBadClaim: a claim is present but has the wrong form; see [ClaimError].
	ErrBadClaim = errors.New("token claim is invalid")
	// ErrLifetime: exp is further past iat than the issuer's ttl allows:
	// a token the issuer would never have minted.
	ErrLifetime = errors.New("token lifetime is longer than the issuer mints")
	// ErrBindingMismatch: the token is valid but bound to another invoke.
	ErrBindingMismatch = errors.New("token is bound to another invoke")
)

// Minting and key management failures.
var (
	// ErrDeadlinePassed: the invocation deadline is already past, so no
	// token may be minted for it.
	ErrDeadlinePassed = errors.New("invocation deadline has passed")
	// ErrInvalidBinding: a binding claim needed to mint is empty.
	ErrInvalidBinding = errors.New("token binding is incomplete")
	// ErrConflict: a key source changed between load and save
	// (another replica rotated first).
	ErrConflict = errors.New("key set changed concurrently")
	// ErrInsecureKeyFile: a key file is readable or writable by its group
	// or others.
	ErrInsecureKeyFile = errors.New("key file permissions are too open")
	// ErrNoActiveKey: the key set holds no key that may sign.
	ErrNoActiveKey = errors.New("key set has no active signing key")
)

// ClaimError says which claim a token lacks or carries in the wrong form.
type ClaimError struct {
	Claim string // the claim's JSON name
	Err   error  // ErrMissingClaim, or a description of the bad form
}

func (e *ClaimError) Error() string { return fmt.Sprintf("claim %q: %v", e.Claim, e.Err) }

func (e *ClaimError) Unwrap() error { return e.Err }
