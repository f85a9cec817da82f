// Package mcp is the host's Model Context Protocol front door: every
// tool of every plugin the host serves (each Executa tool, each
// dispatchable plugin/v1 method) as an MCP tool, called through the
// host's one invoke path.
//
// New builds the tool list from the host (Host.Tools): a plugin/v1
// method's input schema is derived from its input message type
// (MessageSchema, protojson's mapping), an Executa tool's from its
// manifest parameters; the annotations come from the method's risk class
// and declared side effect (read-only and idempotent, destructive, or
// MCP's worst-case defaults). The list follows the host: a plugin added,
// started, failed or quarantined changes it, and the SDK sends
// notifications/tools/list_changed to every session. Handler serves the
// streamable HTTP transport; Bridge serves the same tools on another
// transport (stdio, for `airlock mcp`) by forwarding to that endpoint.
//
// A tools/call runs Host.Invoke for the principal the request was
// authenticated as, acting for itself: the policy, grants, approvals,
// budgets and evidence apply as they do to a control API call. A refusal
// is a tool error result (isError) with the control API's code
// (control.Refusal) in its structured content and _meta; a call held for
// approval sends a progress notification naming the approval and, after
// Options.ApprovalHold, answers that it is pending, with the approval's
// id, instead of failing. A plugin/v1 RUNNING message becomes a progress
// notification.
//
// # Security
//
// Handler is served only behind the control API's authentication
// (control.Auth): it names no caller itself, and refuses a request that
// arrives without one. A session is bound to the principal that opened
// it; a request of another principal on it is refused, a principal
// holds at most Options.MaxSessions sessions, and a session's DELETE
// ends its calls in flight. A tool name is never that of another
// plugin's method (colliding names all get a suffix). Tool
// descriptions, input schemas, results and progress text come from
// plugins: each is marked as untrusted (in the text and in _meta under
// MetaUntrusted), clipped, stripped of control and invisible
// characters, and never trusted by the host. A refusal
// carries Airlock's code and host-authored detail, never a value of the
// request; log lines name principal, plugin and code only.
//
// # Concurrency
//
// A Server serves any number of sessions at once; one goroutine (New to
// Close) keeps its tool list in step with the host. Bridge's goroutines
// end before it returns.
package mcp
