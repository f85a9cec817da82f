package broker

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestProcessorValidation(t *testing.T) {
	ref := SecretRef{Source: SourceFile, Path: "example/api", Field: "token"}
	auth := []Destination{{Host: "auth.example.com", PathPrefix: "/oauth/"}, {Host: "api.example.com"}}
	tok := TokenInject{TokenURL: "https://auth.example.com/oauth/token", Scopes: []string{"read"}}
	for _, tc := range []struct {
		name   string
		inject Inject
		dests  []Destination
		want   string // "" valid, else part of the error
	}{
		{"hmac", Inject{Kind: &HMACInject{Header: "X-Signature", Template: "sha256={{signature}}"}}, nil, ""},
		{"hmac bad algorithm", Inject{Kind: &HMACInject{Header: "X-Sig", Algorithm: "md5"}}, nil, "hmac.algorithm"},
		{"hmac no header", Inject{Kind: &HMACInject{}}, nil, "hmac.header"},
		{"hmac hop-by-hop header", Inject{Kind: &HMACInject{Header: "Proxy-Authorization"}}, nil, "hmac.header"},
		{"hmac template without signature", Inject{Kind: &HMACInject{Header: "X-Sig", Template: "v1"}}, nil, "hmac.template"},
		{"hmac bad encoding", Inject{Kind: &HMACInject{Header: "X-Sig", Encoding: "base32"}}, nil, "hmac.encoding"},
		{"sigv4", Inject{Kind: &SigV4Inject{Region: "eu-west-1", Service: "s3"}}, nil, ""},
		{"sigv4 bad region", Inject{Kind: &SigV4Inject{Region: "eu west"}}, nil, "aws_sigv4.region"},
		{"client credentials", Inject{Kind: &OAuth2ClientCredentialsInject{TokenInject: tok, ClientID: "c"}}, auth, ""},
		{"client credentials, both ids", Inject{Kind: &OAuth2ClientCredentialsInject{TokenInject: tok, ClientID: "c", ClientIDField: "id"}}, auth, "exactly one of client_id"},
		{"client credentials, bad auth style", Inject{Kind: &OAuth2ClientCredentialsInject{TokenInject: tok, ClientID: "c", AuthStyle: "cookie"}}, auth, "auth_style"},
		{"token endpoint not declared", Inject{Kind: &OAuth2ClientCredentialsInject{TokenInject: tok, ClientID: "c"}},
			[]Destination{{Host: "api.example.com"}}, "covered by the intent's own destinations"},
		{"token endpoint outside the declared path", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: TokenInject{TokenURL: "https://auth.example.com/other/token"}}},
			auth, "covered by the intent's own destinations"},
		{"token endpoint over http", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: TokenInject{TokenURL: "http://auth.example.com/oauth/token"}}},
			auth, "https:// URL"},
		{"jwt bearer", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: tok, Subject: "user@example.com"}}, auth, ""},
		{"jwt bearer, issuer twice", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: tok, Issuer: "a", IssuerField: "b"}}, auth, "at most one of issuer"},
		{"token template without token", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: TokenInject{TokenURL: tok.TokenURL, Template: "Bearer"}}}, auth, "template"},
		{"scope with a space", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: TokenInject{TokenURL: tok.TokenURL, Scopes: []string{"a b"}}}}, auth, "scopes[0]"},
		{"negative refresh backoff", Inject{Kind: &OAuth2JWTBearerInject{TokenInject: TokenInject{TokenURL: tok.TokenURL, RefreshBackoff: -1}}}, auth, "refresh_backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("/dev/null")
			cfg.Intents = map[string]Intent{"p": {Class: ClassWrite, Secret: ref, Inject: tc.inject, Destinations: tc.dests}}
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestInjectTokenDefaults(t *testing.T) {
	in := Inject{Kind: &OAuth2ClientCredentialsInject{ClientID: "c"}}
	tk := in.Kind.WithDefaults().(*OAuth2ClientCredentialsInject).TokenInject
	if tk.Header != "Authorization" || tk.Template != "Bearer {{token}}" || tk.Skew != defaultTokenSkew || tk.RefreshBackoff != defaultRefreshBackoff || in.Name() != "oauth2_client_credentials" {
		t.Fatalf("%+v %s", tk, in.Name())
	}
	if in.Kind.(*OAuth2ClientCredentialsInject).Header != "" {
		t.Fatal("WithDefaults changed its receiver")
	}
}

// The processors as an operator writes them in YAML.
func TestProcessorYAML(t *testing.T) {
	var in Intent
	err := yaml.Unmarshal([]byte(`
class: write
secret: {source: vault, mount: secret, path: payments/oauth, field: client_secret}
destinations: ["https://auth.example.com/oauth/", "https://api.example.com/"]
inject:
  oauth2_client_credentials:
    token_url: https://auth.example.com/oauth/token
    scopes: [payments.read]
    client_id_field: client_id
    skew: 2m
    refresh_backoff: 30s
`), &in)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := in.Inject.Kind.(*OAuth2ClientCredentialsInject)
	if c == nil || c.TokenURL != "https://auth.example.com/oauth/token" || c.ClientIDField != "client_id" || c.Skew.Minutes() != 2 ||
		len(c.Scopes) != 1 || c.RefreshBackoff.Seconds() != 30 {
		t.Fatalf("%+v", c)
	}
}
