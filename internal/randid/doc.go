// Package randid makes the random identifiers Airlock names things by:
// invocation ids, approval and grant ids, ETags, test tokens. It is the
// one place such ids come from, so they all draw on crypto/rand and none
// is guessable from another.
//
// An id is only a name. Secrets with their own format (handles, peer
// tokens, signing keys) are made where they are defined.
package randid
