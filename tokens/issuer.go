package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults for IssuerOptions.
const (
	DefaultTTL    = 600 * time.Second
	DefaultGrace  = 30 * time.Second
	DefaultIssuer = "airlock"
)

// IssuerOptions configure an Issuer. Zero values take the defaults.
type IssuerOptions struct {
	Issuer string        // iss; DefaultIssuer
	TTL    time.Duration // longest lifetime; DefaultTTL
	// Grace is how long past the invocation deadline a token may live.
	Grace time.Duration // DefaultGrace
	Now   func() time.Time
}

// Issuer mints sampling and storage tokens with the ring's active key.
type Issuer struct {
	ring *Ring
	opts IssuerOptions
}

// NewIssuer returns an Issuer signing with ring.
func NewIssuer(ring *Ring, opts IssuerOptions) *Issuer {
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Grace < 0 {
		opts.Grace = 0
	} else if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Issuer{ring: ring, opts: opts}
}

// SamplingGrant is what a sampling token is minted for.
type SamplingGrant struct {
	Binding
	Deadline          time.Time // the invocation deadline
	MaxTokensPerCall  int       // negotiated cap, > 0
	MaxCallsPerInvoke int       // negotiated cap, > 0
}

// StorageGrant is what a storage token is minted for. AppID and AppSlug
// are set only when the host attests that the invoke comes from an App.
type StorageGrant struct {
	Binding
	Deadline time.Time
	AppID    string
	AppSlug  string
}

// MintSampling mints a sampling_token (aud executa-sampling).
func (i *Issuer) MintSampling(g SamplingGrant) (string, *Claims, error) {
	if g.MaxTokensPerCall <= 0 || g.MaxCallsPerInvoke <= 0 {
		return "", nil, errors.New("sampling caps maxTokensPerCall and maxCallsPerInvoke must be positive")
	}
	c, err := i.claims(AudienceSampling, g.Binding, g.Deadline)
	if err != nil {
		return "", nil, err
	}
	c.MaxTokensPerCall, c.MaxCallsPerInvoke = g.MaxTokensPerCall, g.MaxCallsPerInvoke
	return i.sign(c)
}

// MintStorage mints a storage_token (aud aps-storage) with the platform
// scopes, plus scope app when the grant carries the App claims.
func (i *Issuer) MintStorage(g StorageGrant) (string, *Claims, error) {
	if (g.AppID == "") != (g.AppSlug == "") {
		return "", nil, errors.New("app_id and app_slug must be given together")
	}
	c, err := i.claims(AudienceStorage, g.Binding, g.Deadline)
	if err != nil {
		return "", nil, err
	}
	c.Scopes = []string{ScopeUser, ScopeTool}
	if g.AppID != "" {
		c.Scopes = append(c.Scopes, ScopeApp)
		c.AppID, c.AppSlug = g.AppID, g.AppSlug
	}
	return i.sign(c)
}

func (i *Issuer) claims(aud string, b Binding, deadline time.Time) (*Claims, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBinding, err)
	}
	now := i.opts.Now()
	if deadline.IsZero() {
		return nil, errors.New("invocation deadline is required")
	}
	if !deadline.After(now) {
		return nil, ErrDeadlinePassed
	}
	exp := now.Add(i.opts.TTL)
	if capAt := deadline.Add(i.opts.Grace); capAt.Before(exp) {
		exp = capAt
	}
	// NumericDate has second precision: round iat down and exp down, so
	// the token never lives past the cap.
	iat := now.Truncate(time.Second)
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return nil, fmt.Errorf("token id: %w", err)
	}
	return &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.opts.Issuer,
			Audience:  jwt.ClaimStrings{aud},
			IssuedAt:  jwt.NewNumericDate(iat),
			NotBefore: jwt.NewNumericDate(iat),
			ExpiresAt: jwt.NewNumericDate(exp.Truncate(time.Second)),
			ID:        base64.RawURLEncoding.EncodeToString(jti[:]),
		},
		Binding: b,
	}, nil
}

// wireClaims is Claims as minted: aud as a single string (RFC 7519
// allows it, and verifiers that compare aud to a string expect it), times
// as integer seconds. It is also what Verify decodes into.
type wireClaims struct {
	Issuer    string          `json:"iss"`
	Audience  json.RawMessage `json:"aud"`
	IssuedAt  *float64        `json:"iat"`
	NotBefore *float64        `json:"nbf,omitempty"`
	ExpiresAt *float64        `json:"exp"`
	ID        string          `json:"jti"`
	Binding
	MaxTokensPerCall  int      `json:"maxTokensPerCall,omitempty"`
	MaxCallsPerInvoke int      `json:"maxCallsPerInvoke,omitempty"`
	Scopes            []string `json:"scopes,omitempty"`
	AppID             string   `json:"app_id,omitempty"`
	AppSlug           string   `json:"app_slug,omitempty"`
}

func (i *Issuer) sign(c *Claims) (string, *Claims, error) {
	k := i.ring.Active()
	if k == nil {
		return "", nil, ErrNoActiveKey
	}
	var scratch [512]byte
	payload := appendClaims(scratch[:0], c)
	// One buffer: header . payload . signature, signed in place.
	enc := base64.RawURLEncoding
	head := k.header()
	n := len(head) + 1 + enc.EncodedLen(len(payload))
	buf := make([]byte, n, n+1+enc.EncodedLen(maxSignatureSize))
	copy(buf, head)
	buf[len(head)] = '.'
	enc.Encode(buf[len(head)+1:], payload)
	sig, err := k.signBytes(buf)
	if err != nil {
		return "", nil, fmt.Errorf("sign token: %w", err)
	}
	buf = append(buf, '.')
	buf = buf[:len(buf)+enc.EncodedLen(len(sig))]
	enc.Encode(buf[n+1:], sig)
	return string(buf), c, nil
}
