package redact

import (
	"regexp"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tt := range []struct {
		name, in, secret string
	}{
		{"handle", "using alh_5k2Q9zWv8YbXc3Lr7Tn1Pq4Mh6Gd0Fs2Ja8Ke5Uw9Io3Ey7 now", "alh_5k2Q9zWv8YbXc3Lr7Tn1Pq4Mh6Gd0Fs2Ja8Ke5Uw9Io3Ey7"},
		{"bearer", "Authorization: Bearer alh_abcdefghijklmnop", "abcdefghijklmnop"},
		{"bearer opaque", "sent Bearer 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"},
		{"password pair", "login password=hunter2 ok", "hunter2"},
		{"json secret", `{"api_key":"k-123456789","x":1}`, "k-123456789"},
		{"colon token", "token: abcdef123456", "abcdef123456"},
		{"jwt", "tok eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl end", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"},
		{"openai key", "key sk-proj-AbCdEfGhIjKlMnOpQrSt", "sk-proj-AbCdEfGhIjKlMnOpQrSt"},
		{"aws key", "AKIAIOSFODNN7EXAMPLE in env", "AKIAIOSFODNN7EXAMPLE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if strings.Contains(got, tt.secret) || !strings.Contains(got, Mask) {
				t.Fatalf("String(%q) = %q", tt.in, got)
			}
		})
	}
	for _, plain := range []string{"listening on 127.0.0.1:8080", "fetched 3 tickets in 12ms", "tokens used: 42"} {
		if got := String(plain); got != plain {
			t.Errorf("String(%q) = %q: plain text changed", plain, got)
		}
	}
}

func TestExtraPatterns(t *testing.T) {
	r := &Redactor{Extra: []*regexp.Regexp{regexp.MustCompile(`ACME-[0-9]{6}`)}}
	if got := r.String("id ACME-123456 here"); strings.Contains(got, "ACME-123456") {
		t.Fatalf("extra pattern not applied: %q", got)
	}
}

func FuzzString(f *testing.F) {
	f.Add("password=hunter2 Bearer abcdefgh alh_0123456789abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if String(out) != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, String(out))
		}
	})
}
