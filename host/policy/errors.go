package policy

import "errors"

var (
	// errNotCompiled: a rule's `when` was never compiled (a Rule written
	// as a Go literal, not loaded by Parse); it fails closed.
	errNotCompiled = errors.New("when: not compiled (use Parse or Load)")
	// ErrMalformedCase is a policy test case that cannot be run: a
	// missing name or expect, an unknown effect or risk.
	ErrMalformedCase = errors.New("malformed test case")
	// errInputNotJSON: InputJSON was given bytes that are not JSON.
	errInputNotJSON = errors.New("policy: the call's input is not JSON")
)
