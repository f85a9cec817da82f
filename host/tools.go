package host

import (
	"encoding/json"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-dev/airlock/host/policy"
)

// Tool is one method a plugin serves, as a catalog for agents (the MCP
// front door) lists it. What it says comes from the plugin's manifest or
// the host's port file; a catalog shows it, but nothing in the invoke
// path trusts it.
type Tool struct {
	// Method is what InvokeRequest.Method names to call it.
	Method string
	// Description is the text the plugin (an Executa manifest) or the
	// port file (a method's leading comment) gives: untrusted.
	Description string
	// InputSchema is the JSON Schema of the input where the runtime
	// states one (Executa: built from the manifest's parameters); Input
	// is the input message type where the input is a protobuf message
	// (plugin/v1), from which a catalog derives one.
	InputSchema json.RawMessage
	Input       protoreflect.MessageDescriptor
	// Risk is the method's risk class (what the policy sees); SideEffect
	// the strongest side effect its port declares ("none", "read",
	// "write", "destructive"; "" when it states none).
	Risk       policy.Risk
	SideEffect string
	DryRun     bool
}

// ToolLister is a Runtime that can list the methods it serves.
type ToolLister interface {
	Tools() []Tool
}

// Tools lists the methods plugin name serves: those of its running
// process, or, while an Executa plugin is stopped or starting cold,
// those its last process served. None while it is failed, restarting,
// quarantined or unknown, or when its runtime lists none.
func (h *Host) Tools(name string) []Tool {
	h.mu.Lock()
	e := h.plugins[name]
	h.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.quarantine != nil {
		return nil
	}
	switch {
	case e.state == StateRunning && e.rt != nil:
		if tl, ok := e.rt.(ToolLister); ok {
			e.tools = tl.Tools()
		}
		return e.tools
	case e.state == StateStopped, e.state == StateStarting && e.cold:
		return e.tools
	default:
		return nil
	}
}

// Changed returns a channel that is closed at the next change of the
// plugins: one added, a state change of any plugin, a quarantine or its
// release, a port installed or removed (PortsChanged). A catalog waits on it to learn that its list may be stale.
func (h *Host) Changed() <-chan struct{} { return h.feed.wait() }

// PortsChanged tells Changed's waiters that the ports the host serves
// changed (one installed or removed): the methods a plugin/v1 plugin
// lists may differ with no change of the plugin itself.
func (h *Host) PortsChanged() { h.feed.notify() }

// changeFeed wakes whoever waits for the next change of the registry.
type changeFeed struct {
	mu sync.Mutex
	ch chan struct{}
}

func (f *changeFeed) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

// notify is nil-safe: an entry made outside a Host has no feed.
func (f *changeFeed) notify() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}
