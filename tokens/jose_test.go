package tokens

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// forgeRaw signs a header and claims given as raw JSON with k, so that a
// test can write what a map cannot hold (duplicate members, odd case).
func forgeRaw(tb testing.TB, k *Key, header, claims string) string {
	tb.Helper()
	signing := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	sig, err := signingMethod(k).Sign(signing, k.signer)
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// joseAccepts is go-jose's verdict on a compact JWS signed by k: its form,
// header and signature (it does not read the claims).
func joseAccepts(tok string, k *Key) bool {
	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256})
	if err != nil {
		return false
	}
	_, err = jws.Verify(k.Public())
	return err == nil
}

// The verifier is no laxer than go-jose about a token's form and header,
// and stricter where encoding/json would read what RFC 7515 does not
// allow: each token below is validly signed, and the verifier refuses it
// as malformed. go-jose refuses a case-variant or duplicate alg too; it
// accepts (so the verifier is stricter on purpose) a case-variant kid,
// which it ignores but encoding/json would read as kid, and CR or LF in
// the token, which base64 decoding skips but a compact JWS never holds.
func TestStrictJWSAgainstJOSE(t *testing.T) {
	for _, alg := range []string{EdDSA, ES256} {
		t.Run(alg, func(t *testing.T) {
			f := newFixture(t, alg)
			k := f.rng.Active()
			claims, err := json.Marshal(f.validClaims())
			if err != nil {
				t.Fatal(err)
			}
			good := forgeRaw(t, k, `{"alg":"`+alg+`","kid":"`+k.ID+`"}`, string(claims))
			if !joseAccepts(good, k) {
				t.Fatal("go-jose refused the well-formed token")
			}
			if _, err := f.ver.VerifySampling(context.Background(), good); err != nil {
				t.Fatalf("the well-formed token: %v", err)
			}
			kid := `"kid":"` + k.ID + `"`
			for _, tt := range []struct {
				name, token string
				jose        bool // go-jose's verdict
			}{
				{"ALG", forgeRaw(t, k, `{"ALG":"`+alg+`",`+kid+`}`, string(claims)), false},
				{"Alg", forgeRaw(t, k, `{"Alg":"`+alg+`",`+kid+`}`, string(claims)), false},
				{"alg twice", forgeRaw(t, k, `{"alg":"`+alg+`","alg":"`+alg+`",`+kid+`}`, string(claims)), false},
				{"alg twice, first bad", forgeRaw(t, k, `{"alg":"none","alg":"`+alg+`",`+kid+`}`, string(claims)), false},
				{"KID", forgeRaw(t, k, `{"alg":"`+alg+`","KID":"`+k.ID+`"}`, string(claims)), true},
				{"trailing CRLF", good + "\r\n", true},
				{"trailing LF", good + "\n", true},
				{"CRLF inside the signature", good[:len(good)-4] + "\r\n" + good[len(good)-4:], true},
				{"trailing space", good + " ", false},
				{"padded signature", good + "==", false},
			} {
				t.Run(tt.name, func(t *testing.T) {
					if got := joseAccepts(tt.token, k); got != tt.jose {
						t.Fatalf("go-jose accepts=%v, want %v", got, tt.jose)
					}
					if _, err := f.ver.VerifySampling(context.Background(), tt.token); !errors.Is(err, ErrMalformed) {
						t.Fatalf("verified or refused for another reason: %v", err)
					}
				})
			}
			// Claims are held to the same rule (go-jose's JWT reader
			// refuses duplicate members too).
			dup := strings.Replace(string(claims), `"exp":`, `"exp":1,"exp":`, 1)
			caseVariant := strings.Replace(string(claims), `"exp":`, `"EXP":`, 1)
			for name, c := range map[string]string{"exp twice": dup, "EXP": caseVariant} {
				tok := forgeRaw(t, k, `{"alg":"`+alg+`",`+kid+`}`, c)
				if _, err := f.ver.VerifySampling(context.Background(), tok); !errors.Is(err, ErrMalformed) {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// FuzzVerifyAgainstJOSE: a validly signed token whose header is any
// bytes verifies only if go-jose accepts it too.
func FuzzVerifyAgainstJOSE(f *testing.F) {
	fx := newFixture(f, EdDSA)
	k := fx.rng.Active()
	claims, err := json.Marshal(fx.validClaims())
	if err != nil {
		f.Fatal(err)
	}
	kid := `"kid":"` + k.ID + `"`
	for _, h := range []string{
		`{"alg":"EdDSA",` + kid + `}`,
		`{"alg":"EdDSA",` + kid + `,"typ":"JWT"}`,
		`{"ALG":"EdDSA",` + kid + `}`,
		`{"alg":"EdDSA","alg":"EdDSA",` + kid + `}`,
		`{"alg":"EdDSA",` + kid + `,"crit":["exp"]}`,
		`{"alg":"EdDSA",` + kid + `} `,
		`{"\u0061lg":"EdDSA",` + kid + `}`,
		` {"alg":"EdDSA",` + kid + `}`,
	} {
		f.Add(h, "")
	}
	f.Add(`{"alg":"EdDSA",`+kid+`}`, "\r\n")
	f.Fuzz(func(t *testing.T, header, suffix string) {
		tok := forgeRaw(t, k, header, string(claims)) + suffix
		if _, err := fx.ver.VerifySampling(context.Background(), tok); err == nil && !joseAccepts(tok, k) {
			t.Fatalf("verified a token go-jose refuses: header %q suffix %q", header, suffix)
		}
	})
}
