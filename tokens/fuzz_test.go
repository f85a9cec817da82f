package tokens

import (
	"context"
	"strings"
	"testing"
)

// FuzzVerify: random and mutated tokens never verify and never panic.
// Only the exact tokens the issuer minted may verify.
func FuzzVerify(f *testing.F) {
	fx := newFixture(f, EdDSA)
	valid := map[string]bool{}
	for _, tok := range []string{fx.sampling(f), fx.storage(f)} {
		valid[tok] = true
		f.Add(tok)
		parts := strings.Split(tok, ".")
		f.Add(parts[0] + "." + parts[1] + ".")
		f.Add(parts[0] + ".." + parts[2])
		f.Add(tok + "A")
	}
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, tok string) {
		for _, aud := range []string{AudienceSampling, AudienceStorage} {
			c, err := fx.ver.Verify(context.Background(), tok, aud)
			if err == nil && !valid[tok] {
				t.Fatalf("a token the issuer did not mint verified: %q", tok)
			}
			if err == nil && c == nil {
				t.Fatal("nil claims without error")
			}
		}
	})
}
