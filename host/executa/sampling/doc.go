// Package sampling holds the backends of Executa's sampling service: what
// answers a plugin's sampling/createMessage once host/executa has checked
// the call (its token, its limits, its budget).
//
// A backend is host-wide: one per host, shared by every Executa plugin,
// configured under host.executa.sampling. Backend is the seam host/executa
// calls; Request and Completion are what crosses it, and Error is how a
// backend says why it failed, so that the plugin learns a kind and the
// operator reads one log line, never the key or the provider's body.
//
// Two backends ship: OpenAI, an OpenAI-compatible chat-completions
// endpoint reached through Airlock's own egress proxy with a brokered
// credential (a handle minted per call and revoked when the call ends),
// and Fixture, canned answers from a JSONL file for dev and tests.
//
// The package imports the broker's API and host's invocation end
// (host.EndInvocation), never host/executa.
package sampling
