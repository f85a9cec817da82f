// Package tokens mints and verifies the short-lived JWTs that Executa
// plugins present on reverse-RPC callbacks: the sampling_token
// (aud "executa-sampling") and the storage_token (aud "aps-storage").
//
// An [Issuer] signs with the active key of a [Ring]; a [Verifier] checks
// audience, issuer, lifetime, algorithm and the binding claims that tie a
// token to one invoke (user_id, executa_tool_id, tool_invoke_id). Keys are
// identified by their RFC 7638 thumbprint and published as a JWKS.
//
// # Security
//
// Only EdDSA (Ed25519) and ES256 are accepted, and the token's alg must
// match the key its kid names: "none" and HMAC tokens never verify, so a
// public key can never be used as an HMAC secret. The compact form is
// read strictly: base64url characters only (base64 decoding would skip CR
// and LF), and header and claims members unique and in their exact case
// (encoding/json would read "ALG" as alg, and the last of two). A token's lifetime is
// capped at the invocation deadline plus a small grace, so it does not
// outlive its invoke by much. Errors say which check failed and never echo
// the token or any of its claims.
//
// A Ring keeps retired keys for verification until the longest token
// lifetime plus leeway has passed, then drops them, so a key that was
// rotated out stops verifying at a predictable time. Key sources that
// several replicas share (a file, Vault KV v2) are written with
// check-and-set, so concurrent rotations converge on one key set.
//
// # Concurrency
//
// Issuer, Verifier and Ring are safe for concurrent use. Signing reads the
// ring through an atomic snapshot and takes no lock.
//
// # Size
//
// The package is over 1,500 lines because issuing, verifying and
// rotating keys share one key ring: the claims, the strict encoder and
// reader, the JWKS, and the key sources (file, Vault) that rotation
// writes with check-and-set. Each file is one of those.
package tokens
