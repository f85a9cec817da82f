package proxy

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlock-dev/airlock/broker"
)

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1, plus
// Proxy-Connection (sent by some clients). Every header named in
// Connection is hop-by-hop too.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// stripHopByHop removes hop-by-hop headers, the headers Connection names,
// and every Proxy-* header.
func stripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// badHeaderValue reports a value that could split or smuggle a header.
func badHeaderValue(s string) bool { return strings.ContainsAny(s, "\r\n\x00") }

// inject applies the intent's injection to the outbound request. handle
// is the handle the plugin used (for placeholder substitution). It
// returns the forms of the secret the echo guard must look for.
func inject(r *http.Request, in broker.Intent, s broker.Secret, handle string) (*echoForms, *denial) {
	secret := s.Value
	key := formsKey{secret: secret}
	if in.Inject.Basic != nil {
		key.basicUser = s.Username
	}
	switch {
	case in.Inject.Header != nil:
		if badHeaderValue(secret) {
			return nil, deny(CodeSecretInvalid, "the bound secret cannot be sent in a header").withReason("secret holds CR, LF or NUL")
		}
		name := in.Inject.Header.Name
		r.Header.Del(name)
		r.Header.Set(name, strings.Replace(in.Inject.Header.Template, broker.SecretPlaceholder, secret, 1))
	case in.Inject.Basic != nil:
		if badHeaderValue(secret) || badHeaderValue(s.Username) || strings.Contains(s.Username, ":") {
			return nil, deny(CodeSecretInvalid, "the bound secret cannot be sent as basic auth").withReason("secret or user holds CR, LF, NUL or ':' in the user")
		}
		r.Header.Del("Authorization")
		r.SetBasicAuth(s.Username, secret)
	case in.Inject.Query != nil:
		r.URL.RawQuery = setQuery(r.URL.RawQuery, in.Inject.Query.Name, secret)
	case in.Inject.Placeholder != nil:
		if badHeaderValue(secret) {
			return nil, deny(CodeSecretInvalid, "the bound secret cannot be sent in a header").withReason("secret holds CR, LF or NUL")
		}
		found := false
		for _, name := range in.Inject.Placeholder.Headers {
			vals := r.Header.Values(name)
			for i, v := range vals {
				if strings.Contains(v, handle) {
					vals[i] = strings.ReplaceAll(v, handle, secret)
					found = true
				}
			}
		}
		if !found {
			return nil, deny(CodePlaceholderMissing, "the handle must appear in one of the headers the intent substitutes")
		}
	}
	return cachedForms(key, func() []string {
		forms := encodings(secret)
		if in.Inject.Basic != nil {
			forms = append(forms, base64.StdEncoding.EncodeToString([]byte(s.Username+":"+secret)))
		}
		return forms
	}), nil
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
		switch strings.ToLower(scheme) {
		case "bearer":
			return rest, true
		case "basic":
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
