package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/airlock-dev/airlock/tokens"
)

// The host mints a sampling token for one invoke; the sampling service
// verifies it, and the binding check refuses it for any other invoke.
func Example() {
	ctx := context.Background()
	ring, err := tokens.NewRing(ctx, &tokens.MemorySource{}, tokens.RingOptions{Retention: time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	issuer := tokens.NewIssuer(ring, tokens.IssuerOptions{})
	invoke := tokens.Binding{UserID: "u-1", ExecutaToolID: "tickets", ToolInvokeID: "inv-1"}
	raw, _, err := issuer.MintSampling(tokens.SamplingGrant{
		Binding:           invoke,
		Deadline:          time.Now().Add(time.Minute),
		MaxTokensPerCall:  1024,
		MaxCallsPerInvoke: 4,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	verifier, err := tokens.NewVerifier(ring, tokens.VerifierOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	claims, err := verifier.VerifySampling(ctx, raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("audience:", claims.Audience(), "caps:", claims.MaxTokensPerCall, claims.MaxCallsPerInvoke)
	fmt.Println("same invoke:", claims.CheckBinding(invoke))
	other := invoke
	other.ToolInvokeID = "inv-2"
	fmt.Println("other invoke refused:", errors.Is(claims.CheckBinding(other), tokens.ErrBindingMismatch))
	_, err = verifier.VerifyStorage(ctx, raw)
	fmt.Println("not a storage token:", errors.Is(err, tokens.ErrAudience))
	// Output:
	// audience: executa-sampling caps: 1024 4
	// same invoke: <nil>
	// other invoke refused: true
	// not a storage token: true
}

// A verifier in another process fetches the public keys from the JWKS
// endpoint that `airlock serve` publishes on its admin listener.
func ExampleJWKSClient() {
	ctx := context.Background()
	ring, _ := tokens.NewRing(ctx, &tokens.MemorySource{}, tokens.RingOptions{Retention: time.Hour})
	admin := httptest.NewServer(tokens.JWKSHandler(ring))
	defer admin.Close()

	raw, _, err := tokens.NewIssuer(ring, tokens.IssuerOptions{}).MintStorage(tokens.StorageGrant{
		Binding:  tokens.Binding{UserID: "u-1", ExecutaToolID: "tickets", ToolInvokeID: "inv-1"},
		Deadline: time.Now().Add(time.Minute),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	verifier, _ := tokens.NewVerifier(&tokens.JWKSClient{URL: admin.URL + tokens.JWKSPath}, tokens.VerifierOptions{})
	claims, err := verifier.VerifyStorage(ctx, raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("verified through JWKS:", claims.Audience(), claims.Scopes)
	// Output:
	// verified through JWKS: aps-storage [user tool]
}
