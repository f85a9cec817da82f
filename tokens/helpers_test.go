package tokens

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/airlock-dev/airlock/internal/testenv"
)

type clock = testenv.Clock

func newClock() *clock { return testenv.NewClock() }

// fixture is one ring with an issuer and a verifier on a shared clock.
type fixture struct {
	clk *clock
	src *MemorySource
	rng *Ring
	iss *Issuer
	ver *Verifier
}

func newFixture(tb testing.TB, alg string) *fixture {
	tb.Helper()
	f := &fixture{clk: newClock(), src: &MemorySource{}}
	var err error
	f.rng, err = NewRing(context.Background(), f.src, RingOptions{
		Algorithm: alg, Retention: DefaultTTL + DefaultLeeway, Now: f.clk.Now, MinRefresh: time.Nanosecond,
	})
	if err != nil {
		tb.Fatalf("NewRing: %v", err)
	}
	f.iss = NewIssuer(f.rng, IssuerOptions{Now: f.clk.Now})
	f.ver, err = NewVerifier(f.rng, VerifierOptions{Now: f.clk.Now})
	if err != nil {
		tb.Fatalf("NewVerifier: %v", err)
	}
	return f
}

var testBinding = Binding{UserID: "u-1", ExecutaToolID: "tool-1", ToolInvokeID: "8f1c0c7e2b7a4e0d9a3c6d1b5e2f4a90"}

func (f *fixture) sampling(tb testing.TB) string {
	tb.Helper()
	tok, _, err := f.iss.MintSampling(SamplingGrant{
		Binding: testBinding, Deadline: f.clk.Now().Add(time.Minute), MaxTokensPerCall: 8192, MaxCallsPerInvoke: 8,
	})
	if err != nil {
		tb.Fatalf("MintSampling: %v", err)
	}
	return tok
}

func (f *fixture) storage(tb testing.TB) string {
	tb.Helper()
	tok, _, err := f.iss.MintStorage(StorageGrant{Binding: testBinding, Deadline: f.clk.Now().Add(time.Minute)})
	if err != nil {
		tb.Fatalf("MintStorage: %v", err)
	}
	return tok
}

// validClaims returns the claims of a good sampling token as a map, for
// tests that forge tokens with one thing changed.
func (f *fixture) validClaims() map[string]any {
	now := f.clk.Now().Unix()
	return map[string]any{
		"iss": DefaultIssuer, "aud": AudienceSampling, "iat": now, "nbf": now, "exp": now + 60,
		"jti": "j1", "user_id": testBinding.UserID, "executa_tool_id": testBinding.ExecutaToolID,
		"tool_invoke_id": testBinding.ToolInvokeID, "maxTokensPerCall": 8192, "maxCallsPerInvoke": 8,
	}
}

// forge signs arbitrary header and claims with k (which need not be in a ring).
func forge(tb testing.TB, k *Key, header, claims map[string]any) string {
	tb.Helper()
	signing := b64JSON(tb, header) + "." + b64JSON(tb, claims)
	sig, err := signingMethod(k).Sign(signing, k.signer)
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func b64JSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("marshal: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hdr(k *Key) map[string]any { return map[string]any{"alg": k.Algorithm, "kid": k.ID, "typ": "JWT"} }

// signingMethod is golang-jwt's method for k, to forge tokens in tests.
func signingMethod(k *Key) jwt.SigningMethod {
	if k.Algorithm == ES256 {
		return jwt.SigningMethodES256
	}
	return jwt.SigningMethodEdDSA
}
