package proxy

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// stripHopByHop removes hop-by-hop headers, the headers Connection names,
// and every Proxy-* header.
func stripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for rest := v; rest != ""; {
			var name string
			name, rest, _ = strings.Cut(rest, ",")
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	// One pass over the header (a few names) instead of a lookup per
	// hop-by-hop name: this runs on every request and response.
	for k := range h {
		if isHopHeader(k) || strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// isHopHeader reports whether the canonical name k is a hop-by-hop
// header of RFC 9110 section 7.6.1, or Proxy-Connection (sent by some
// clients). Every header named in Connection is hop-by-hop too.
func isHopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// badHeaderValue reports a value that could split or smuggle a header.
func badHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if h1.SplitsHead(s[i]) {
			return true
		}
	}
	return false
}

// The static kinds: the secret is sent as it is.
func init() {
	registerInjector("header", kindFuncs[*broker.HeaderInject]{onInject: injectHeader})
	registerInjector("basic", kindFuncs[*broker.BasicInject]{onInject: injectBasic})
	registerInjector("query", kindFuncs[*broker.QueryInject]{onInject: injectQuery})
	registerInjector("placeholder", kindFuncs[*broker.PlaceholderInject]{onInject: injectPlaceholder,
		onPolicy: func(k *broker.PlaceholderInject) kindPolicy { return kindPolicy{restore: k.Headers} }})
}

func headerSecretDenial() *denial {
	return deny(CodeSecretInvalid, "the bound secret cannot be sent in a header").withReason("secret holds CR, LF or NUL")
}

func injectHeader(r *http.Request, k *broker.HeaderInject, s broker.Secret, _ string) (*echoForms, *denial) {
	if badHeaderValue(s.Value) {
		return nil, headerSecretDenial()
	}
	r.Header.Del(k.Name)
	r.Header.Set(k.Name, headerValue(k.Template, s.Value))
	return secretOnlyForms(s.Value), nil
}

// headerValues holds injected header values by template and secret, like
// the echo guard's forms (cleared when full, so a rotated secret's value
// does not stay): a steady stream of requests sends the same value.
var headerValues = memo[headerValueKey, string]{max: 256}

type headerValueKey struct{ template, secret string }

// headerValue is template with the secret in place of its placeholder.
func headerValue(template, secret string) string {
	k := headerValueKey{template, secret}
	if v, ok := headerValues.load(k); ok {
		return v
	}
	v := strings.Replace(template, broker.SecretPlaceholder, secret, 1)
	headerValues.store(k, v)
	return v
}

func injectBasic(r *http.Request, _ *broker.BasicInject, s broker.Secret, _ string) (*echoForms, *denial) {
	if badHeaderValue(s.Value) || badHeaderValue(s.Username) || strings.Contains(s.Username, ":") {
		return nil, deny(CodeSecretInvalid, "the bound secret cannot be sent as basic auth").withReason("secret or user holds CR, LF, NUL or ':' in the user")
	}
	r.Header.Del("Authorization")
	r.SetBasicAuth(s.Username, s.Value)
	return cachedForms(formsKey{secret: s.Value, basicUser: s.Username}, func() []string {
		return append(encodings(s.Value), base64.StdEncoding.EncodeToString([]byte(s.Username+":"+s.Value)))
	}), nil
}

func injectQuery(r *http.Request, k *broker.QueryInject, s broker.Secret, _ string) (*echoForms, *denial) {
	r.URL.RawQuery = setQuery(r.URL.RawQuery, k.Name, s.Value)
	return secretOnlyForms(s.Value), nil
}

// injectPlaceholder swaps the handle for the secret where the plugin put
// it, in the headers the intent names.
func injectPlaceholder(r *http.Request, k *broker.PlaceholderInject, s broker.Secret, handle string) (*echoForms, *denial) {
	if badHeaderValue(s.Value) {
		return nil, headerSecretDenial()
	}
	found := false
	for _, name := range k.Headers {
		vals := r.Header.Values(name)
		for i, v := range vals {
			if strings.Contains(v, handle) {
				vals[i] = strings.ReplaceAll(v, handle, s.Value)
				found = true
			}
		}
	}
	if !found {
		return nil, deny(CodePlaceholderMissing, "the handle must appear in one of the headers the intent substitutes")
	}
	return secretOnlyForms(s.Value), nil
}

// setQuery replaces every value of name in a raw query with value,
// leaving the other parameters exactly as sent.
func setQuery(raw, name, value string) string {
	var b strings.Builder
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name {
			continue
		}
		b.WriteString(part)
		b.WriteByte('&')
	}
	b.WriteString(url.QueryEscape(name))
	b.WriteByte('=')
	b.WriteString(url.QueryEscape(value))
	return b.String()
}

func dedupe(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s == "" {
			continue
		}
		dup := false
		for _, o := range out {
			if o == s {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out
}

// extractHandle finds the handle: Proxy-Authorization Bearer, or Basic
// with the handle as user name (HTTP_PROXY=http://<handle>@host:port) or
// password; else a handle-shaped value in a request header (placeholder
// mode). The second result names where it was found.
func extractHandle(r *http.Request) (string, bool) {
	if pa := r.Header.Get("Proxy-Authorization"); pa != "" {
		scheme, rest, _ := strings.Cut(pa, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case strings.EqualFold(scheme, "bearer"):
			return rest, true
		case strings.EqualFold(scheme, "basic"):
			dec, err := base64.StdEncoding.DecodeString(rest)
			if err != nil {
				return "", false
			}
			user, pass, _ := strings.Cut(string(dec), ":")
			if u, err := url.PathUnescape(user); err == nil {
				user = u
			}
			// The handle may be the user name (HTTP_PROXY=http://<handle>@…)
			// or the password (clients that insist on a user name:
			// "x:<handle>"): whichever has the handle's shape.
			if !broker.LooksLikeHandle(user) && broker.LooksLikeHandle(pass) || user == "" {
				return pass, true
			}
			return user, true
		}
		return "", false
	}
	for _, vals := range r.Header {
		for _, v := range vals {
			if i := strings.Index(v, broker.HandlePrefix); i >= 0 {
				if cand := handleAt(v[i:]); cand != "" {
					return cand, true
				}
			}
		}
	}
	return "", false
}

// handleAt returns the handle-shaped token at the start of s, if any.
func handleAt(s string) string {
	n := len(broker.HandlePrefix) + 49
	if len(s) < n {
		return ""
	}
	cand := s[:n]
	if !broker.LooksLikeHandle(cand) {
		return ""
	}
	for i := len(broker.HandlePrefix); i < n; i++ {
		if !isBase62(cand[i]) {
			return ""
		}
	}
	return cand
}
