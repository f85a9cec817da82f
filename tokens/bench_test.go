package tokens

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"
)

// The raw benchmarks sign and verify a payload of the same size as a
// sampling token's signing input, so mint/raw and verify/raw ratios can be
// read from one run.

func benchSigningInput(b *testing.B, f *fixture) string {
	tok := f.sampling(b)
	return tok[:strings.LastIndexByte(tok, '.')]
}

func BenchmarkMint(b *testing.B) {
	f := newFixture(b, EdDSA)
	g := SamplingGrant{Binding: testBinding, Deadline: f.clk.Now().Add(time.Minute), MaxTokensPerCall: 8192, MaxCallsPerInvoke: 8}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := f.iss.MintSampling(g); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawEd25519Sign(b *testing.B) {
	msg := []byte(benchSigningInput(b, newFixture(b, EdDSA)))
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	b.ReportAllocs()
	for b.Loop() {
		_ = ed25519.Sign(priv, msg)
	}
}

func BenchmarkVerify(b *testing.B) {
	f := newFixture(b, EdDSA)
	tok := f.sampling(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ver.VerifySampling(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawEd25519Verify(b *testing.B) {
	msg := []byte(benchSigningInput(b, newFixture(b, EdDSA)))
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	sig := ed25519.Sign(priv, msg)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("verify failed")
		}
	}
}
