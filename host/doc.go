// Package host is Airlock's plugin host: it launches untrusted provider
// processes, checks what they announce and declare against what was
// installed, hands them one approved action at a time, serves their
// callbacks, and records what happened in a hash-chained evidence log.
//
// # Security
//
// Everything a provider sends is checked, and errors name the field, never
// the value. A provider is identified by the connection the host made at
// launch, never by what it claims.
package host
