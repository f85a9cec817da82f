package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// ControlPrincipals is host.control_principals: who the control API's
// callers are, beyond what their connection says.
//
//   - Tokens: each principal's own token file (a bearer token, read at
//     each request; the principal is its name).
//   - Peers: names for the unix socket's uids (others are "uid:<N>").
//   - JWT: bearer JWTs of one OIDC issuer; the principal is
//     "jwt:<issuer>#<principal claim>".
type ControlPrincipals struct {
	Tokens []ControlToken `yaml:"tokens"`
	Peers  []ControlPeer  `yaml:"peers"`
	JWT    *ControlJWT    `yaml:"jwt"`
}

// ControlToken is a principal's token file.
type ControlToken struct {
	Principal string `yaml:"principal"`
	File      string `yaml:"file"`
}

// ControlPeer names a uid of the unix control socket (UID, or User by
// name).
type ControlPeer struct {
	UID       *int   `yaml:"uid"`
	User      string `yaml:"user"`
	Principal string `yaml:"principal"`
}

// ControlJWT is the OIDC issuer whose JWTs the control API accepts.
type ControlJWT struct {
	// Issuer is the iss the tokens carry: an https URL (http only on a
	// loopback address, for tests).
	Issuer string `yaml:"issuer"`
	// Audience is required: a token meant for another service must not
	// pass.
	Audience string `yaml:"audience"`
	// JWKSURL (https, or http on loopback) or JWKSFile holds the
	// issuer's keys.
	JWKSURL  string `yaml:"jwks_url"`
	JWKSFile string `yaml:"jwks_file"`
	// PrincipalClaim names the principal (default sub).
	PrincipalClaim string `yaml:"principal_claim"`
	// Attributes are claims passed to the policy.
	Attributes []string `yaml:"attributes"`
	// Leeway is the clock skew allowed on exp, nbf and iat (default
	// 30s, at most 5m).
	Leeway time.Duration `yaml:"leeway"`
}

// principalName: a configured principal's name. It has no ":", so it
// never equals an ID of another kind ("uid:0", "jwt:…", "spiffe://…",
// "cn:…", "dn:…").
var principalName = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,128}$`)

// claimName: a JWT claim's name.
var claimName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// reservedPrincipal is the control token's own principal.
const reservedPrincipal = "control-token"

// bearer: some bearer method besides the control token is configured.
func (p ControlPrincipals) bearer() bool { return len(p.Tokens) > 0 || p.JWT != nil }

func (p ControlPrincipals) validate() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	name := func(at, n string) {
		switch {
		case !principalName.MatchString(n):
			add("%s.principal: must be 1-128 characters of A-Z a-z 0-9 . _ @ -", at)
		case n == reservedPrincipal:
			add("%s.principal: %q is the control token's principal", at, reservedPrincipal)
		}
	}
	seen := map[string]bool{}
	files := map[string]bool{}
	for i, t := range p.Tokens {
		at := fmt.Sprintf("host.control_principals.tokens[%d]", i)
		name(at, t.Principal)
		if seen[t.Principal] {
			add("%s.principal: a second token for the same principal", at)
		}
		seen[t.Principal] = true
		if !filepath.IsAbs(t.File) {
			add("%s.file: must be an absolute path", at)
		}
		if files[t.File] {
			add("%s.file: another principal's token file", at)
		}
		files[t.File] = true
	}
	uids := map[int]bool{}
	users := map[string]bool{}
	for i, pe := range p.Peers {
		at := fmt.Sprintf("host.control_principals.peers[%d]", i)
		name(at, pe.Principal)
		switch {
		case (pe.UID == nil) == (pe.User == ""):
			add("%s: exactly one of uid and user", at)
		case pe.UID != nil && *pe.UID < 0:
			add("%s.uid: uids are not negative", at)
		case pe.UID != nil && uids[*pe.UID], users[pe.User]:
			add("%s: a second name for the same uid", at)
		case pe.UID != nil:
			uids[*pe.UID] = true
		default:
			users[pe.User] = true
		}
	}
	if j := p.JWT; j != nil {
		errs = append(errs, j.validate()...)
	}
	return errs
}

func (j ControlJWT) validate() []error {
	var errs []error
	const at = "host.control_principals.jwt"
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(at+"."+format, a...)) }
	if err := secureURL(j.Issuer); err != nil {
		add("issuer: %v", err)
	}
	if j.Audience == "" {
		add("audience: required (a token meant for another service must not pass)")
	}
	switch {
	case (j.JWKSURL == "") == (j.JWKSFile == ""):
		add("jwks_url, jwks_file: exactly one is required")
	case j.JWKSURL != "":
		if err := secureURL(j.JWKSURL); err != nil {
			add("jwks_url: %v", err)
		}
	case !filepath.IsAbs(j.JWKSFile):
		add("jwks_file: must be an absolute path")
	}
	if j.PrincipalClaim != "" && !claimName.MatchString(j.PrincipalClaim) {
		add("principal_claim: must be a claim name")
	}
	for i, a := range j.Attributes {
		if !claimName.MatchString(a) {
			add("attributes[%d]: must be a claim name", i)
		}
	}
	if j.Leeway < 0 || j.Leeway > 5*time.Minute {
		add("leeway: must be between 0 and 5m")
	}
	return errs
}

// secureURL: an https URL, or http on a loopback address (a test's
// issuer); the keys that name principals must not cross a network in
// clear.
func secureURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return errors.New("must be an absolute https URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return errors.New("must be https (http only on a loopback address)")
	}
	return errors.New("must be an absolute https URL")
}

// checkControlPrincipals is CheckFiles for host.control_principals: each
// token file exists, is private and holds a token; the JWKS file holds a
// usable key (a JWKS URL is fetched by the host, not here); each peer
// user exists.
func checkControlPrincipals(p ControlPrincipals, check func(key, path string, dir, secret bool) bool,
	addErr func(key, path string, err error), add func(error)) {
	for i, t := range p.Tokens {
		key := fmt.Sprintf("host.control_principals.tokens[%d].file", i)
		if t.File == "" {
			continue
		}
		if _, err := os.Stat(t.File); errors.Is(err, fs.ErrNotExist) {
			add(fmt.Errorf("%s: missing (the host does not create principals' tokens)", key))
			continue
		}
		if check(key, t.File, false, true) {
			if _, err := peerauth.LoadToken(key, t.File, peerauth.NoGroup); err != nil {
				addErr(key, t.File, err)
			}
		}
	}
	for i, pe := range p.Peers {
		if pe.User == "" {
			continue
		}
		if _, err := peerauth.LookupUIDs([]string{pe.User}); err != nil {
			add(fmt.Errorf("host.control_principals.peers[%d].user: not a user on this system", i))
		}
	}
	if j := p.JWT; j != nil && j.JWKSFile != "" {
		const key = "host.control_principals.jwt.jwks_file"
		if check(key, j.JWKSFile, false, false) {
			keys, err := control.NewJWKS(control.JWKSOptions{File: j.JWKSFile})
			if err == nil {
				err = keys.Check(context.Background())
			}
			if err != nil {
				addErr(key, j.JWKSFile, err)
			}
		}
	}
}
