package broker

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Class is an intent's risk class.
type Class string

// Intent classes. A read-class handle may only be used with safe methods
// (GET, HEAD, OPTIONS), and is the only class a dry run may get.
const (
	ClassRead  Class = "read"
	ClassWrite Class = "write"
)

// Grant is what a handle stands for. It is immutable once issued, but
// for a pass's ExpiresAt, which renewals move forward (see Store.Renew).
type Grant struct {
	PluginID     string        `json:"plugin_id"`
	InvocationID string        `json:"invocation_id"`
	Intent       string        `json:"intent"`
	Class        Class         `json:"class"`
	Destinations []Destination `json:"destinations"`
	DryRun       bool          `json:"dry_run,omitempty"`
	// Pass marks a plugin pass: no intent, no secret, CONNECT only.
	Pass      bool      `json:"pass,omitempty"`
	IssuedAt  time.Time `json:"issued_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// RenewUntil is as far as renewals may move a pass's ExpiresAt (its
	// deadline, or IssuedAt plus max_pass_lifetime); zero: no limit.
	RenewUntil time.Time `json:"renew_until,omitzero"`
	// Fingerprint of the handle, for audit lines.
	Fingerprint string `json:"fingerprint"`

	// The decision point's context, from the host (never the plugin):
	// see IssueRequest.
	RunID         string       `json:"run_id,omitempty"`
	AccessGrantID string       `json:"access_grant_id,omitempty"`
	Budget        []BudgetLine `json:"budget,omitempty"`
	Residency     []string     `json:"residency,omitempty"`
	OnViolation   string       `json:"on_violation,omitempty"`
}

// Destination is one place a handle may be used: https to Host (exact, or
// "*.example.com" for exactly one more label) on Port, under PathPrefix,
// with one of Methods (any method when empty).
type Destination struct {
	Host       string   `json:"host" yaml:"host"`
	Port       int      `json:"port,omitempty" yaml:"port"`
	PathPrefix string   `json:"path_prefix,omitempty" yaml:"path_prefix"`
	Methods    []string `json:"methods,omitempty" yaml:"methods"`
	// Region is where this destination's API lives, overriding its
	// intent binding's region (residency). Only an intent binding's
	// destinations carry one: the proxy never reads it from a manifest's.
	Region string `json:"region,omitempty" yaml:"region"`

	// invalid and line keep a config problem for Validate, so decoding
	// goes on and every problem is reported at once, with its line.
	invalid error
	line    int
}

// defaultPort is the port of a destination that names none.
const defaultPort = 443

// ParseDestination parses the shorthand "https://host[:port][/prefix]".
func ParseDestination(s string) (Destination, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Destination{}, fmt.Errorf("destination must look like https://host[:port][/path-prefix]")
	}
	d := Destination{Host: u.Hostname(), PathPrefix: u.EscapedPath()}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Destination{}, fmt.Errorf("destination port must be 1-65535")
		}
		d.Port = n
	}
	return d.Normalize()
}

// UnmarshalYAML accepts the shorthand string or the full mapping. A value
// that does not make a destination is kept as a problem for Validate
// (with its line) instead of ending the decoding.
func (d *Destination) UnmarshalYAML(n *yaml.Node) error {
	var p Destination
	var err error
	if n.Kind == yaml.ScalarNode {
		p, err = ParseDestination(n.Value)
	} else {
		var plain struct {
			Host       string   `yaml:"host"`
			Port       int      `yaml:"port"`
			PathPrefix string   `yaml:"path_prefix"`
			Methods    []string `yaml:"methods"`
			Region     string   `yaml:"region"`
		}
		if err = n.Decode(&plain); err != nil {
			return err // a type error: yaml reports it with its line
		}
		p, err = Destination{Host: plain.Host, Port: plain.Port, PathPrefix: plain.PathPrefix, Methods: plain.Methods, Region: plain.Region}.Normalize()
	}
	if err != nil {
		*d = Destination{invalid: err, line: n.Line}
		return nil
	}
	*d = p
	return nil
}

// String is d as an operator reads it (and a plugin, in a refusal that
// lists its own handle's destinations): the URL prefix and the methods.
func (d Destination) String() string {
	methods := "any method"
	if len(d.Methods) > 0 {
		methods = strings.Join(d.Methods, ",")
	}
	return fmt.Sprintf("https://%s:%d%s (%s)", d.Host, d.Port, d.PathPrefix, methods)
}

// Check returns the problem decoding found, naming its config line.
func (d Destination) Check() error {
	if d.invalid == nil {
		return nil
	}
	return fmt.Errorf("line %d: %w", d.line, d.invalid)
}

// Normalize lower-cases the host, drops a trailing dot, fills the default
// port and path, upper-cases methods, and checks the form.
func (d Destination) Normalize() (Destination, error) {
	d.Host = strings.TrimSuffix(strings.ToLower(d.Host), ".")
	if d.Port == 0 {
		d.Port = defaultPort
	}
	if d.PathPrefix == "" {
		d.PathPrefix = "/"
	}
	if err := checkHostPattern(d.Host); err != nil {
		return Destination{}, err
	}
	if d.Port < 1 || d.Port > 65535 {
		return Destination{}, fmt.Errorf("destination port must be 1-65535")
	}
	if !strings.HasPrefix(d.PathPrefix, "/") {
		return Destination{}, fmt.Errorf("destination path_prefix must start with /")
	}
	for _, seg := range strings.Split(d.PathPrefix, "/") {
		if seg == "." || seg == ".." {
			return Destination{}, fmt.Errorf("destination path_prefix must not contain . or .. segments")
		}
	}
	ms := make([]string, 0, len(d.Methods))
	for _, m := range d.Methods {
		m = strings.ToUpper(m)
		if !isToken(m) {
			return Destination{}, fmt.Errorf("destination method is not an HTTP method token")
		}
		ms = append(ms, m)
	}
	slices.Sort(ms)
	d.Methods = slices.Compact(ms)
	return d, nil
}

// checkHostPattern accepts a DNS name (already punycode), or "*." and one.
// IP literals are refused: destinations are names, and the proxy checks
// the addresses they resolve to.
func checkHostPattern(h string) error {
	name := strings.TrimPrefix(h, "*.")
	if net.ParseIP(name) != nil || strings.HasPrefix(name, "[") {
		return fmt.Errorf("destination host must be a DNS name, not an IP address")
	}
	if len(name) == 0 || len(name) > 253 || !strings.Contains(name, ".") {
		return fmt.Errorf("destination host must be a fully qualified DNS name")
	}
	// No top-level domain is numeric: a name whose last label is digits
	// (or 0x hex) is an IP address in another spelling (127.1,
	// 127.000.000.001, 0x7f.1), or a wildcard that can only match such
	// names (*.0.0.1). The resolver would turn it into an address.
	if labels := strings.Split(name, "."); numericLabel(labels[len(labels)-1]) {
		return fmt.Errorf("destination host must be a DNS name, not an IP address in any spelling")
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("destination host has an invalid label")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return fmt.Errorf("destination host must be lower-case ASCII (use punycode for IDNs)")
			}
		}
	}
	return nil
}

// numericLabel reports a label of decimal digits or 0x-prefixed hex.
func numericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		l = h
		if l == "" {
			return true
		}
		for i := 0; i < len(l); i++ {
			if !('0' <= l[i] && l[i] <= '9' || 'a' <= l[i] && l[i] <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return l != ""
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}
