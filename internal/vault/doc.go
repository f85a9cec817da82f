// Package vault connects Airlock to HashiCorp Vault (or OpenBao): address,
// namespace, TLS and authentication, shared by the token key source and
// the broker's secret source.
//
// # Security
//
// The Vault token is read from a file or from the airlock process's own
// VAULT_TOKEN; it is never logged, never put in an error, and never passed
// to a plugin (the host clears VAULT_* from every plugin environment).
package vault
