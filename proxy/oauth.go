package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/airlock-dev/airlock/broker"
)

// The OAuth2 processors: the proxy obtains an access token with the
// long-lived credential from Vault, caches it per intent until it nears
// its expiry (tokenCache), and sends it; the token endpoint's answer
// never reaches the plugin, and the echo guard catches the token as it
// catches the secret.

// noExpiryLife is how long a token is kept when the endpoint gives no
// expires_in.
const noExpiryLife = 5 * time.Minute

// jwtAssertionLife is the lifetime of a JWT bearer assertion.
const jwtAssertionLife = 5 * time.Minute

// maxClockSkew is the difference between the proxy's clock and the
// token endpoint's Date beyond which a refusal is blamed on the clock.
const maxClockSkew = 5 * time.Minute

// The OAuth2 processors, one per grant: each fills the token request
// from the secret; the rest (cache, fetch, header) is shared.
func init() {
	registerInjector("oauth2_client_credentials", kindFuncs[*broker.OAuth2ClientCredentialsInject]{
		onProcess: func(r *http.Request, x *exchange, k *broker.OAuth2ClientCredentialsInject) *denial {
			return x.s.setToken(r, x, k.TokenInject, func(cc *clientcredentials.Config, sec broker.Secret) error {
				return clientCredentials(cc, k, sec)
			})
		},
		onPolicy: func(*broker.OAuth2ClientCredentialsInject) kindPolicy { return kindPolicy{tokenRetry: true} }})
	registerInjector("oauth2_jwt_bearer", kindFuncs[*broker.OAuth2JWTBearerInject]{
		onProcess: func(r *http.Request, x *exchange, k *broker.OAuth2JWTBearerInject) *denial {
			return x.s.setToken(r, x, k.TokenInject, func(cc *clientcredentials.Config, sec broker.Secret) error {
				t := k.TokenInject.WithTokenDefaults()
				assertion, err := jwtAssertion(k, &t, sec)
				if err != nil {
					return err
				}
				cc.EndpointParams = url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}}
				return nil
			})
		},
		onPolicy: func(*broker.OAuth2JWTBearerInject) kindPolicy { return kindPolicy{tokenRetry: true} }})
}

// tokenGrant fills a token request from the secret, for one grant type.
type tokenGrant func(cc *clientcredentials.Config, sec broker.Secret) error

// setToken puts the intent's access token in the request.
func (s *Server) setToken(r *http.Request, x *exchange, settings broker.TokenInject, grant tokenGrant) *denial {
	t := settings.WithTokenDefaults()
	intent, sec := x.grant.Intent, x.secret
	tok, source, err := s.tokens.get(r.Context(), tokenRequest{intent: intent, version: sec.Version, skew: t.Skew, backoff: t.RefreshBackoff,
		timeout: s.cfg.Upstream.DialTimeout + s.cfg.Upstream.TLSHandshakeTimeout + s.cfg.Upstream.ResponseTimeout,
		fetch: func(ctx context.Context) (*oauth2.Token, error) {
			tok, err := s.fetchToken(ctx, credKey{intent: intent, version: sec.Version, lease: sec.Lease}, t, sec, grant)
			result := "ok"
			switch {
			case errors.Is(ctx.Err(), context.Canceled):
				result = "abandoned"
			case err != nil:
				result = tokenDenial(err).code
			}
			s.metrics.tokenFetch(intent, result)
			return tok, err
		}})
	x.audit.TokenCache = source
	if err != nil {
		return tokenDenial(err)
	}
	if badHeaderValue(tok.AccessToken) {
		return deny(CodeTokenExchange, "the token endpoint's access token cannot be sent in a header").withReason("token holds CR, LF or NUL")
	}
	x.token = tok.AccessToken
	r.Header.Del(t.Header)
	r.Header.Set(t.Header, strings.Replace(t.Template, broker.TokenPlaceholder, tok.AccessToken, 1))
	x.forms = cachedForms(formsKey{secret: x.secret.Value, derived: tok.AccessToken}, func() []string {
		return secretForms(x.secret.Value, tok.AccessToken)
	})
	return nil
}

// fetchToken asks the token endpoint, through the proxy's own upstream
// client (the address policy and verified TLS apply; redirects are not
// followed) on connections of the intent's own (cred, with no plugin:
// the token is the intent's, never a plugin's). ctx is the fetch's own
// (tokenCache): no single client's.
func (s *Server) fetchToken(ctx context.Context, cred credKey, t broker.TokenInject, sec broker.Secret, grant tokenGrant) (*oauth2.Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: s.up.transport(cred),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	cc := clientcredentials.Config{TokenURL: t.TokenURL, Scopes: t.Scopes, AuthStyle: oauth2.AuthStyleInParams}
	if err := grant(&cc, sec); err != nil {
		return nil, err
	}
	return cc.Token(ctx)
}

// clientCredentials fills the client credentials grant (RFC 6749 4.4).
func clientCredentials(cc *clientcredentials.Config, c *broker.OAuth2ClientCredentialsInject, sec broker.Secret) error {
	cc.ClientID, cc.ClientSecret = c.ClientID, sec.Value
	if c.ClientIDField != "" {
		if cc.ClientID = sec.Fields[c.ClientIDField]; cc.ClientID == "" {
			return errTokenSecret{"field " + c.ClientIDField + " missing"}
		}
	}
	if c.AuthStyle != "params" {
		cc.AuthStyle = oauth2.AuthStyleInHeader
	}
	return nil
}

// errTokenSecret: the bound secret cannot make a token request.
type errTokenSecret struct{ reason string }

func (e errTokenSecret) Error() string { return "the bound secret is not usable: " + e.reason }

// jwtAssertion signs the RFC 7523 assertion with the secret's private
// key: RS256 for RSA, ES256 for P-256.
func jwtAssertion(j *broker.OAuth2JWTBearerInject, t *broker.TokenInject, sec broker.Secret) (string, error) {
	key, err := parseKey([]byte(sec.Value))
	if err != nil {
		return "", errTokenSecret{err.Error()}
	}
	var method jwt.SigningMethod
	switch k := key.(type) {
	case *rsa.PrivateKey:
		method = jwt.SigningMethodRS256
	case *ecdsa.PrivateKey:
		if k.Curve == elliptic.P256() {
			method = jwt.SigningMethodES256
		}
	}
	if method == nil {
		return "", errTokenSecret{"the private key is neither RSA nor ECDSA P-256"}
	}
	iss := j.Issuer
	if iss == "" {
		field := j.IssuerField
		if field == "" {
			field = "client_email"
		}
		if iss = sec.Fields[field]; iss == "" {
			return "", errTokenSecret{"field " + field + " (the issuer) missing"}
		}
	}
	now := time.Now()
	claims := jwt.MapClaims{"iss": iss, "sub": iss, "aud": t.TokenURL, "iat": now.Unix(), "exp": now.Add(jwtAssertionLife).Unix(),
		"jti": rand.Text()}
	if j.Subject != "" {
		claims["sub"] = j.Subject
	}
	if j.Audience != "" {
		claims["aud"] = j.Audience
	}
	if len(t.Scopes) > 0 {
		claims["scope"] = strings.Join(t.Scopes, " ")
	}
	tok := jwt.NewWithClaims(method, claims)
	kidField := j.KeyIDField
	if kidField == "" {
		kidField = "private_key_id"
	}
	if kid := sec.Fields[kidField]; kid != "" {
		tok.Header["kid"] = kid
	}
	signed, err := tok.SignedString(key)
	if err != nil {
		return "", errTokenSecret{"signing the assertion failed"}
	}
	return signed, nil
}

// tokenEndpointDown reports whether a failed fetch means the token
// endpoint is down (unreachable, timed out, or a 5xx answer) rather than
// that it refused the credential or answered nonsense: an outage is
// retried at refresh_backoff, a refusal backs off further (tokenCache).
func tokenEndpointDown(err error) bool {
	var re *oauth2.RetrieveError
	var se errTokenSecret
	switch {
	case errors.As(err, &se):
		return false
	case errors.As(err, &re):
		return re.Response != nil && re.Response.StatusCode >= http.StatusInternalServerError
	case strings.HasPrefix(err.Error(), "oauth2: "):
		return false
	}
	return true
}

// tokenDenial maps a failed fetch to the plugin's answer. A refusal's
// body is never used: it may echo what was sent.
func tokenDenial(err error) *denial {
	var re *oauth2.RetrieveError
	var se errTokenSecret
	switch {
	case errors.As(err, &se):
		return deny(CodeSecretInvalid, "the bound secret cannot be used to obtain an access token").withReason(se.reason)
	case errors.As(err, &re):
		if re.Response != nil {
			if at, perr := http.ParseTime(re.Response.Header.Get("Date")); perr == nil {
				if off := time.Since(at); off > maxClockSkew || off < -maxClockSkew {
					return deny(CodeClockSkew, "the proxy's clock differs from the token endpoint's; the token request was refused").
						withReason(fmt.Sprintf("clock offset %s, status %d", off.Round(time.Second), re.Response.StatusCode))
				}
			}
			return deny(CodeTokenExchange, "the token endpoint refused the credential").
				withReason(fmt.Sprintf("status %d, error %q", re.Response.StatusCode, re.ErrorCode))
		}
		return deny(CodeTokenExchange, "the token endpoint refused the credential")
	case strings.HasPrefix(err.Error(), "oauth2: "):
		// A malformed answer (no access_token, bad JSON): never the body.
		return deny(CodeTokenExchange, "the token endpoint's answer holds no usable access token")
	}
	d := upstreamDenial(err)
	return deny(CodeTokenEndpoint, "the token endpoint could not be reached; no request was sent").withReason(d.code + ": " + d.auditReason())
}
