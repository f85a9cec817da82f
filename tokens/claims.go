package tokens

import (
	"fmt"
	"slices"

	"github.com/golang-jwt/jwt/v5"
)

// Audiences of the two Executa tokens.
const (
	AudienceSampling = "executa-sampling"
	AudienceStorage  = "aps-storage"
)

// Storage scopes. User and tool are a platform constant carried by every
// storage token; app is added only with host-attested app claims.
const (
	ScopeUser = "user"
	ScopeTool = "tool"
	ScopeApp  = "app"
)

// Binding ties a token to one invoke.
type Binding struct {
	UserID        string `json:"user_id"`
	ExecutaToolID string `json:"executa_tool_id"`
	ToolInvokeID  string `json:"tool_invoke_id"`
}

func (b Binding) check() error {
	for _, c := range []struct{ name, v string }{
		{"user_id", b.UserID}, {"executa_tool_id", b.ExecutaToolID}, {"tool_invoke_id", b.ToolInvokeID},
	} {
		if c.v == "" {
			return &ClaimError{Claim: c.name, Err: ErrMissingClaim}
		}
	}
	return nil
}

// Claims are the verified contents of a sampling or storage token.
type Claims struct {
	jwt.RegisteredClaims
	Binding

	// Sampling tokens: the caps negotiated in initialize.
	MaxTokensPerCall  int `json:"maxTokensPerCall,omitempty"`
	MaxCallsPerInvoke int `json:"maxCallsPerInvoke,omitempty"`

	// Storage tokens: the scopes the holder may touch, and the
	// host-attested App that unlocks scope "app".
	Scopes  []string `json:"scopes,omitempty"`
	AppID   string   `json:"app_id,omitempty"`
	AppSlug string   `json:"app_slug,omitempty"`
}

// Audience returns the token's single audience.
func (c *Claims) Audience() string {
	if len(c.RegisteredClaims.Audience) != 1 {
		return ""
	}
	return c.RegisteredClaims.Audience[0]
}

// HasScope reports whether a storage token grants scope.
func (c *Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

// CheckBinding returns ErrBindingMismatch unless the token is bound to b.
func (c *Claims) CheckBinding(b Binding) error {
	if c.Binding != b {
		return ErrBindingMismatch
	}
	return nil
}

// Validate implements jwt.ClaimsValidator: the claims every Airlock token
// must carry, beyond the registered-claim checks of the parser.
func (c *Claims) Validate() error {
	switch {
	case c.ExpiresAt == nil:
		return &ClaimError{Claim: "exp", Err: ErrMissingClaim}
	case c.IssuedAt == nil:
		return &ClaimError{Claim: "iat", Err: ErrMissingClaim}
	case c.ID == "":
		return &ClaimError{Claim: "jti", Err: ErrMissingClaim}
	case len(c.RegisteredClaims.Audience) == 0:
		return &ClaimError{Claim: "aud", Err: ErrMissingClaim}
	case len(c.RegisteredClaims.Audience) > 1:
		return &ClaimError{Claim: "aud", Err: fmt.Errorf("%w: must hold exactly one audience", ErrBadClaim)}
	}
	if err := c.Binding.check(); err != nil {
		return err
	}
	switch c.Audience() {
	case AudienceSampling:
		if c.MaxTokensPerCall <= 0 {
			return &ClaimError{Claim: "maxTokensPerCall", Err: ErrMissingClaim}
		}
		if c.MaxCallsPerInvoke <= 0 {
			return &ClaimError{Claim: "maxCallsPerInvoke", Err: ErrMissingClaim}
		}
	case AudienceStorage:
		if len(c.Scopes) == 0 {
			return &ClaimError{Claim: "scopes", Err: ErrMissingClaim}
		}
		for _, s := range c.Scopes {
			switch s {
			case ScopeUser, ScopeTool:
			case ScopeApp:
				if c.AppID == "" || c.AppSlug == "" {
					return &ClaimError{Claim: "app_id", Err: fmt.Errorf("%w: scope app needs app_id and app_slug", ErrBadClaim)}
				}
			default:
				return &ClaimError{Claim: "scopes", Err: fmt.Errorf("%w: unknown scope", ErrBadClaim)}
			}
		}
	}
	return nil
}
