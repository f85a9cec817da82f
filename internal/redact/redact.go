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
)

// Mask replaces every redacted value.
const Mask = "[REDACTED]"

var builtin = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Airlock handles (broker.HandlePrefix), whole or clipped.
	{regexp.MustCompile(`alh_[0-9A-Za-z]{8,}`), "alh_" + Mask},
	// JWTs: three base64url segments, the first a JSON object.
	{regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Mask},
	// Authorization schemes followed by a credential.
	{regexp.MustCompile(`(?i)\b(bearer|basic|token|digest)(\s+)[A-Za-z0-9._~+/=:-]{6,}`), "${1}${2}" + Mask},
	// key=value, key: value and "key":"value" where the key names a secret.
	{regexp.MustCompile(`(?i)((?:api|access|secret|private|client|auth|session|refresh)?[_-]?(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|key|credentials?|authorization)["']?\s*[:=]\s*["']?)([^\s"'&,;}]{3,})`), "${1}" + Mask},
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

// String redacts with Default.
func String(s string) string { return Default.String(s) }
