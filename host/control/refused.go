package control

// Refusal is an invoke-path refusal as the control API states it: the
// code, detail, budget and dimension of its "refused" event (the body
// its JSON error would have had). Another front door of the host (the
// MCP server) tells its callers the same code for the same refusal.
func Refusal(err error) Event { return refusedEvent(err) }
