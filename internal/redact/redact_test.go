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
		{"pem private key", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9\nq4Lz1aB2\n-----END RSA PRIVATE KEY-----\nafter", "MIIEpAIBAAKCAQEA7bq9"},
		{"pem private key cut off", "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI", "MC4CAQAwBQYDK2VwBCIEI"},
		{"db_password still a key", "db_password=hunter2", "hunter2"},
		{"X-Api-Key header", "X-Api-Key: abcdef123456", "abcdef123456"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if strings.Contains(got, tt.secret) || !strings.Contains(got, Mask) {
				t.Fatalf("String(%q) = %q", tt.in, got)
			}
		})
	}
	// The host's own error texts, which a provider may log, stay as
	// they are: a key name inside a longer word is not a key.
	for _, plain := range []string{"listening on 127.0.0.1:8080", "fetched 3 tickets in 12ms", "tokens used: 42",
		"RequestCredential: per-invocation limit exceeded", "-----BEGIN CERTIFICATE-----"} {
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

// A structured field is redacted whole when its key names a secret, in
// any case and with any separator; other fields only lose
// credential-shaped parts.
func TestField(t *testing.T) {
	for _, key := range []string{"password", "PASSWORD", "db_password", "db-passwd", "Api-Key", "api.key", "apikey",
		"API_KEY", "x-api-key", "client_secret", "clientSecret", "privateKey", "private_key", "Private-Key", "token",
		"access_token", "idToken", "Authorization", "credentials", "aws.credential", "session-id", "cookie", "pass",
		"oauth", "basic_auth", "passphrase", "pwd"} {
		if got := Field(key, "hunter2"); got != Mask {
			t.Errorf("Field(%q, hunter2) = %q, want the mask", key, got)
		}
	}
	for _, key := range []string{"user", "author", "tokens_used", "max_tokens", "count", "status", "compass_heading", "passenger"} {
		if got := Field(key, "hunter2"); got != "hunter2" {
			t.Errorf("Field(%q, hunter2) = %q: a plain field was redacted", key, got)
		}
	}
	if got := Field("query", "user=a&password=hunter2"); strings.Contains(got, "hunter2") {
		t.Errorf("Field(query) kept a secret-shaped pair: %q", got)
	}
}

// URL userinfo is redacted whole (a token is often the user name), and
// a quoted secret value is redacted to its closing quote.
func TestUserinfoAndQuotedValues(t *testing.T) {
	for _, tt := range []struct{ in, secret string }{
		{"connecting to postgres://app:hunter2@db.internal:5432/x", "hunter2"},
		{"clone https://x-access-token:s3cr3tvalue@github.com/o/r.git", "s3cr3tvalue"},
		{"GET https://s3cr3tvalue@api.example.com/v1", "s3cr3tvalue"},
		{`{"url":"amqp://guest:hunter2@mq/"}`, "hunter2"},
		{`config {"client_secret": "two words here"}`, "words here"},
		{`DB.Password = hunter2`, "hunter2"},
		{`private.key: hunter2`, "hunter2"},
	} {
		got := String(tt.in)
		if strings.Contains(got, tt.secret) || !strings.Contains(got, Mask) {
			t.Errorf("String(%q) = %q", tt.in, got)
		}
	}
	for _, plain := range []string{"see https://example.com/@user/page", "mail me at a@example.com", "http://127.0.0.1:8080/v1"} {
		if got := String(plain); got != plain {
			t.Errorf("String(%q) = %q: plain text changed", plain, got)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 8, "short"},
		{"exactly8", 8, "exactly8"},
		{"longer than eight", 8, "longer t"},
		{"", 0, ""},
	} {
		if got := Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
