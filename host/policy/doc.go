// Package policy decides, before anything reaches a plugin, whether an
// action may run. The host asks it once per call with the plugin's name,
// the method (a plugin/v1 full method or an Executa tool name), the
// method's Risk and whether the call is a dry run.
//
// # Rules
//
// A policy file (version v1) lists rules; they are tried in order, and the
// first whose every set field matches decides (Decision names it). None
// matching means the default, which is deny unless set to allow. Parse
// decodes strictly (an unknown key is an error) and reports every problem
// at once. AllowAll is the policy of `airlock dev`.
//
// # Security
//
// A host without a policy denies every call (host.ErrNoPolicy): nothing
// runs until an operator wrote down what may. Risk comes from the host's
// own copy of a port's method rule, never from what a plugin claims.
package policy
