// Package redact removes credential-shaped values from text that came
// from a plugin (stderr lines, HostService.Log fields, evidence payloads)
// before the host writes it anywhere.
//
// # Security
//
// Redaction is a safety net, not a boundary: a plugin that wants to leak a
// value it holds can encode it. What it catches is the ordinary accident —
// a handle, a JWT, an Authorization header or a "password=…" pair printed
// by a debug line — so that none reaches a log file or the evidence chain.
package redact

import (
	"regexp"
	"strings"
	"unicode"
)

// Mask replaces every redacted value.
const Mask = "[REDACTED]"

// secretKeyRE matches a key that names a secret in free text, with "_",
// "-" or "." between its words (db_password, X-Api-Key, private.key).
const secretKeyRE = `(?:api|access|secret|private|client|auth|session|refresh)?[_.-]?` +
	`(?:password|passwd|passphrase|pwd|secret|token|api[_.-]?key|apikey|key|credentials?|authorization)`

var builtin = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A PEM private key (first: a key: pair before it must not cut it): from its BEGIN line to its END line (or the end
	// of the text), base64 body included.
	{regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`),
		"-----BEGIN ${1}PRIVATE KEY-----" + Mask + "-----END ${1}PRIVATE KEY-----"},
	// Airlock handles (broker.HandlePrefix), whole or clipped.
	{regexp.MustCompile(`alh_[0-9A-Za-z]{8,}`), "alh_" + Mask},
	// JWTs: three base64url segments, the first a JSON object.
	{regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Mask},
	// Authorization schemes followed by a credential.
	{regexp.MustCompile(`(?i)\b(bearer|basic|token|digest)(\s+)[A-Za-z0-9._~+/=:-]{6,}`), "${1}${2}" + Mask},
	// URL userinfo (scheme://user:password@host, scheme://token@host):
	// the whole userinfo, since a token is often the user name.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@"'<>]+@`), "${1}" + Mask + "@"},
	// "key": "quoted value" where the key names a secret: the whole
	// quoted value, spaces included. The key starts a word (or follows a
	// separator): "RequestCredential: per-invocation limit exceeded", the
	// host's own words, is not a credential.
	{regexp.MustCompile(`(?i)((?:^|[^a-z0-9])` + secretKeyRE + `["']?\s*[:=]\s*")([^"]*)"`), "${1}" + Mask + `"`},
	// key=value, key: value and "key":"value" where the key names a secret.
	{regexp.MustCompile(`(?i)((?:^|[^a-z0-9])` + secretKeyRE + `["']?\s*[:=]\s*["']?)([^\s"'&,;}]{3,})`), "${1}" + Mask},
	// Well-known vendor key shapes.
	{regexp.MustCompile(`\b(?:sk|rk|pk)[-_](?:live|test|proj)?[-_]?[0-9A-Za-z_-]{16,}`), Mask},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Mask},
	{regexp.MustCompile(`\bgh[pousr]_[0-9A-Za-z]{30,}`), Mask},
	{regexp.MustCompile(`\bxox[abpr]-[0-9A-Za-z-]{10,}`), Mask},
}

// Redactor redacts the built-in shapes and any extra patterns the operator
// configured. The zero value redacts the built-in shapes.
type Redactor struct {
	Extra []*regexp.Regexp
}

// Default redacts the built-in shapes only.
var Default = &Redactor{}

// String returns s with every credential-shaped value replaced by Mask.
func (r *Redactor) String(s string) string {
	for _, b := range builtin {
		s = b.re.ReplaceAllString(s, b.repl)
	}
	if r != nil {
		for _, re := range r.Extra {
			s = re.ReplaceAllString(s, Mask)
		}
	}
	return s
}

// PrivateKeyLine reports whether line begins a PEM private key ("-----BEGIN
// … PRIVATE KEY-----") and whether it ends one, for text that comes a line
// at a time (a plugin's stderr): every line from the begin to the end is
// the key's.
func PrivateKeyLine(line string) (begin, end bool) {
	begin = strings.Contains(line, "-----BEGIN ") && strings.Contains(line, "PRIVATE KEY-----")
	end = strings.Contains(line, "-----END ") && strings.Contains(line, "PRIVATE KEY-----")
	return begin, end
}

// Field redacts a structured field with Default.
func Field(key, value string) string { return Default.Field(key, value) }

// String redacts with Default.
func String(s string) string { return Default.String(s) }

// Field returns a structured field's value for a log line: Mask whole when
// the key names a secret (SecretKey), else the value with every
// credential-shaped part redacted, as String does.
func (r *Redactor) Field(key, value string) string {
	if SecretKey(key) {
		return Mask
	}
	return r.String(value)
}

// secretWords name a secret wherever they appear in a key, once its case
// and separators are dropped ("DB_Password", "x-api-key", "privateKey").
var secretWords = []string{"password", "passwd", "passphrase", "secret", "apikey", "privatekey", "accesskey",
	"signingkey", "credential", "authorization", "cookie", "sessionid"}

// secretEndings name a secret when they end a word of the key:
// "token", "access_token", "idToken", "accesstoken" but not "tokens_used"
// or "max_tokens"; "auth", "oauth" but not "author".
var secretEndings = []string{"token", "pwd", "auth"}

// SecretKey reports whether a field name names a secret. Case does not
// matter, and words may be joined by "_", "-", ".", spaces or camelCase.
func SecretKey(key string) bool {
	var flat strings.Builder
	for _, c := range key {
		if unicode.IsLetter(c) || unicode.IsDigit(c) {
			flat.WriteRune(unicode.ToLower(c))
		}
	}
	for _, w := range secretWords {
		if strings.Contains(flat.String(), w) {
			return true
		}
	}
	for _, word := range words(key) {
		if word == "pass" {
			return true
		}
		for _, e := range secretEndings {
			if strings.HasSuffix(word, e) {
				return true
			}
		}
	}
	return false
}

// words splits a key at separators and at lower-to-upper case changes,
// lower-cased.
func words(key string) []string {
	var out []string
	var cur []rune
	prevLower := false
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for _, c := range key {
		switch {
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(c) && prevLower:
			flush()
		}
		cur = append(cur, c)
		prevLower = unicode.IsLower(c) || unicode.IsDigit(c)
	}
	flush()
	return out
}

// Clip cuts s to at most n bytes: a plugin-supplied value is clipped
// before it is redacted into a log line or an evidence record, so what a
// plugin sends cannot make either unbounded.
func Clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
