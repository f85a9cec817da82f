package plugin

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// Stream bounds of plugin/v1.
const (
	// MaxReferenceChunk is the most one ResolveReference chunk holds.
	MaxReferenceChunk = 64 << 10

	MaxStreamMessages = 1024
	MaxRunningSize    = 64 << 10
	MaxTerminalSize   = 4 << 20
)

// PortRule is a method's declaration, read from the port file's options.
type PortRule = *pluginv1.MethodRule

// RuleOf reads the numinance.plugin.v1.rule option of a method.
func RuleOf(m protoreflect.MethodDescriptor) (PortRule, error) {
	opts := m.Options()
	if opts == nil || !proto.HasExtension(opts, pluginv1.E_Rule) {
		return nil, fmt.Errorf("method %s declares no numinance.plugin.v1.rule", m.FullName())
	}
	return proto.GetExtension(opts, pluginv1.E_Rule).(*pluginv1.MethodRule), nil
}

// StreamError says which message broke which rule; it never quotes content.
type StreamError struct {
	Index  int // -1 for the stream as a whole
	Reason string
}

func (e *StreamError) Error() string {
	if e.Index < 0 {
		return "stream: " + e.Reason
	}
	return fmt.Sprintf("messages[%d]: %s", e.Index, e.Reason)
}

// StreamCheck applies the Invoke stream rules as messages arrive: Next for
// each, End when the stream closes. It never buffers the stream, and the
// first failure is sticky.
type StreamCheck struct {
	method    protoreflect.MethodDescriptor
	rule      PortRule
	resultURL string
	n         int
	terminal  bool
	err       error
}

// NewStreamCheck returns a check for one Invoke of method under rule.
func NewStreamCheck(method protoreflect.MethodDescriptor, rule PortRule) (*StreamCheck, error) {
	if method == nil || rule == nil {
		return nil, errors.New("stream check needs a method and its rule")
	}
	if rule.GetExecutionMode() == pluginv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED {
		return nil, fmt.Errorf("method %s declares no execution mode", method.FullName())
	}
	return &StreamCheck{method: method, rule: rule, resultURL: "type.googleapis.com/" + string(method.Output().FullName())}, nil
}

func (c *StreamCheck) fail(i int, format string, a ...any) error {
	c.err = &StreamError{Index: i, Reason: fmt.Sprintf(format, a...)}
	return c.err
}

// Next checks one message.
func (c *StreamCheck) Next(m *pluginv1.ActionResult) error {
	if c.err != nil {
		return c.err
	}
	i := c.n
	c.n++
	switch {
	case m == nil:
		return c.fail(i, "nil message")
	case c.n > MaxStreamMessages:
		return c.fail(i, "more than %d messages", MaxStreamMessages)
	case c.terminal:
		return c.fail(i, "a message after the terminal one")
	}
	if path, what := strayField(m.ProtoReflect(), "message"); what != "" {
		return c.fail(i, "%s at %s", what, path)
	}
	operation := c.rule.GetExecutionMode() == pluginv1.ExecutionMode_EXECUTION_MODE_OPERATION
	switch st := m.GetStatus(); st {
	case pluginv1.Status_STATUS_UNSPECIFIED:
		return c.fail(i, "status is unspecified")
	case pluginv1.Status_STATUS_PARTIAL:
		return c.fail(i, "status PARTIAL is derived by the host, never claimed by a provider")
	case pluginv1.Status_STATUS_RUNNING:
		if !operation {
			return c.fail(i, "RUNNING on a target that is not an OPERATION (exactly one message allowed)")
		}
		if proto.Size(m) > MaxRunningSize {
			return c.fail(i, "RUNNING message larger than %d bytes", MaxRunningSize)
		}
		if m.GetResult() != nil || len(m.GetEvidenceIds()) > 0 || m.GetCost() != nil ||
			m.GetSideEffect() != pluginv1.SideEffect_SIDE_EFFECT_UNSPECIFIED {
			return c.fail(i, "a RUNNING message carries only status and diagnostics")
		}
		if m.GetStreamItem() != nil {
			if !c.rule.GetServerStreaming() {
				return c.fail(i, "stream item on a target that is not server-streaming")
			}
			if err := c.checkAny(m.GetStreamItem(), "stream_item"); err != "" {
				return c.fail(i, "%s", err)
			}
		}
		return nil
	default: // SUCCEEDED, FAILED, CANCELLED: terminal
		c.terminal = true
		if proto.Size(m) > MaxTerminalSize {
			return c.fail(i, "terminal message larger than %d bytes", MaxTerminalSize)
		}
		if m.GetStreamItem() != nil {
			return c.fail(i, "a terminal message carries no stream item")
		}
		if st == pluginv1.Status_STATUS_SUCCEEDED {
			if m.GetResult() == nil {
				return c.fail(i, "SUCCEEDED without a result")
			}
			if err := c.checkAny(m.GetResult(), "result"); err != "" {
				return c.fail(i, "%s", err)
			}
		} else if m.GetResult() != nil {
			return c.fail(i, "a result on a message that is not SUCCEEDED")
		}
		if declared := c.rule.GetDeclaredSideEffect(); m.GetSideEffect() > declared {
			return c.fail(i, "reported side effect exceeds the declared one")
		}
		return nil
	}
}

// checkAny checks an Any holds the method's output type with no unknown
// field and no undefined enum value at any depth.
func (c *StreamCheck) checkAny(a *anypb.Any, field string) string {
	if a.GetTypeUrl() != c.resultURL {
		return field + " is not of the method's output type"
	}
	msg := dynamicpb.NewMessage(c.method.Output())
	if err := proto.Unmarshal(a.GetValue(), msg); err != nil {
		return field + " does not decode as the method's output type"
	}
	if path, what := strayField(msg, field); what != "" {
		return what + " at " + path
	}
	return ""
}

// End checks the stream as a whole once it closed.
func (c *StreamCheck) End() error {
	if c.err != nil {
		return c.err
	}
	switch {
	case c.n == 0:
		return c.fail(-1, "ended without a message")
	case !c.terminal:
		return c.fail(-1, "ended without a terminal message")
	}
	return nil
}

// strayField walks m and returns the path of the first field that is
// unknown or holds an enum number its enum does not define (proto3
// decodes both without complaint), and what is wrong with it. Any
// payloads are opaque here; the stream check decodes the result and
// stream item itself.
func strayField(m protoreflect.Message, path string) (string, string) {
	if len(m.GetUnknown()) > 0 {
		return path, "unknown field"
	}
	bad, what := "", ""
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && what == ""; i++ {
				bad, what = strayValue(fd, l.Get(i), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				bad, what = strayValue(fd.MapValue(), mv, p+"[]")
				return what == ""
			})
		default:
			bad, what = strayValue(fd, v, p)
		}
		return what == ""
	})
	return bad, what
}

// strayValue checks one value of field fd (an element, for a list).
func strayValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) (string, string) {
	switch {
	case fd.Message() != nil:
		return strayField(v.Message(), path)
	case fd.Enum() != nil && fd.Enum().Values().ByNumber(v.Enum()) == nil:
		return path, "undefined enum value"
	}
	return "", ""
}
