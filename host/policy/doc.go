// Package policy decides, before anything reaches a plugin, whether an
// action may run. The host builds a Request for each call — principal,
// actor, plugin, method, risk, declared side effect, dry run, the typed
// input, run, grant, spend, time — and asks Evaluate; the Decision is
// allow, deny or require approval, with the rule that decided and the
// policy's digest. docs/policy.md describes the language.
//
// # Rules
//
// A policy file (version v1) lists rules; they are tried in order, and the
// first whose every set field matches decides. Besides the fixed fields
// (plugins, methods, risk_classes, dry_run) a rule may set `when`, a CEL
// expression compiled and type-checked by Parse, so a misspelt variable
// or field is a load error naming the rule. None matching means the
// default, which is deny unless set to allow. Parse decodes strictly (an
// unknown key is an error) and reports every problem at once. AllowAll is
// the policy of `airlock dev`. Actors rules say which principals may
// state which actors (MayActFor). RunTests runs a directory's test cases
// against its policy, as `airlock policy test` does.
//
// # Security
//
// A host without a policy denies every call (host.ErrNoPolicy): nothing
// runs until an operator wrote down what may. Risk comes from the host's
// own copy of a port's method rule, never from what a plugin claims. A
// `when` that fails to evaluate never widens what the policy allows: an
// allow rule then does not match, a deny or require_approval rule
// denies. Errors name rules, never a request's values. Expressions that
// iterate run under a cost limit.
//
// # Concurrency
//
// A Policy is immutable once Parse returns it: Evaluate and MayActFor
// may be called from any number of goroutines. A reload parses a new
// Policy and swaps the pointer (host.SetPolicy); calls keep the policy
// they were decided by.
package policy
