package plugin

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

func method(t testing.TB, name string) (protoreflect.MethodDescriptor, PortRule) {
	t.Helper()
	m := ticketsv1.File_numinance_ports_tickets_v1_tickets_proto.Services().ByName("Tickets").Methods().ByName(protoreflect.Name(name))
	rule, err := RuleOf(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, rule
}

func anyOf(t testing.TB, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func msg(st pluginv1.Status) *pluginv1.ActionResult { return &pluginv1.ActionResult{Status: st} }

func TestStreamCheck(t *testing.T) {
	list := &ticketsv1.ListTicketsResponse{Tickets: []*ticketsv1.Ticket{{Id: "1", Title: "t"}}}
	created := &ticketsv1.CreateTicketResponse{Ticket: &ticketsv1.Ticket{Id: "2"}}
	ok := func(m proto.Message) *pluginv1.ActionResult {
		return &pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED, Result: anyOf(t, m)}
	}
	withUnknown := func(r *pluginv1.ActionResult) *pluginv1.ActionResult {
		r.ProtoReflect().SetUnknown(protoreflect.RawFields{0xf8, 0x3f, 0x01}) // field 1023, varint 1
		return r
	}
	unknownInResult := func() *pluginv1.ActionResult {
		b, _ := proto.Marshal(list)
		b = append(b, 0xf8, 0x3f, 0x01)
		return &pluginv1.ActionResult{Status: pluginv1.Status_STATUS_SUCCEEDED,
			Result: &anypb.Any{TypeUrl: "type.googleapis.com/numinance.ports.tickets.v1.ListTicketsResponse", Value: b}}
	}
	big := strings.Repeat("x", 70<<10)
	huge := strings.Repeat("y", 5<<20)
	tests := []struct {
		name      string
		method    string
		stream    []*pluginv1.ActionResult
		wantIndex int // -2: accepted; -1: fails at End
		want      string
	}{
		{"call: one SUCCEEDED", "ListTickets", []*pluginv1.ActionResult{ok(list)}, -2, ""},
		{"call: one FAILED with diagnostics", "ListTickets", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_FAILED,
			Diagnostics: []*pluginv1.Diagnostic{{Code: "upstream_500", Path: "project"}}}}, -2, ""},
		{"call: RUNNING", "ListTickets", []*pluginv1.ActionResult{msg(pluginv1.Status_STATUS_RUNNING)}, 0, "not an OPERATION"},
		{"call: two messages", "ListTickets", []*pluginv1.ActionResult{ok(list), ok(list)}, 1, "after the terminal"},
		{"SUCCEEDED without result", "ListTickets", []*pluginv1.ActionResult{msg(pluginv1.Status_STATUS_SUCCEEDED)}, 0, "without a result"},
		{"result of another type", "ListTickets", []*pluginv1.ActionResult{ok(created)}, 0, "output type"},
		{"FAILED with a result", "ListTickets", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_FAILED, Result: anyOf(t, list)}}, 0, "not SUCCEEDED"},
		{"PARTIAL claimed", "ListTickets", []*pluginv1.ActionResult{msg(pluginv1.Status_STATUS_PARTIAL)}, 0, "PARTIAL"},
		{"status unspecified", "ListTickets", []*pluginv1.ActionResult{msg(pluginv1.Status_STATUS_UNSPECIFIED)}, 0, "unspecified"},
		{"unknown field", "ListTickets", []*pluginv1.ActionResult{withUnknown(ok(list))}, 0, "unknown field"},
		{"unknown field in the result", "ListTickets", []*pluginv1.ActionResult{unknownInResult()}, 0, "unknown field at result"},
		{"undefined status", "ListTickets", []*pluginv1.ActionResult{msg(77)}, 0, "undefined enum value at message.status"},
		{"undefined side effect", "ListTickets", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_SUCCEEDED,
			Result: anyOf(t, list), SideEffect: -1}}, 0, "undefined enum value at message.side_effect"},
		{"undefined side effect while RUNNING", "CreateTicket", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_RUNNING,
			SideEffect: 9}}, 0, "undefined enum value"},
		{"side effect above the declared", "ListTickets", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_SUCCEEDED,
			Result: anyOf(t, list), SideEffect: pluginv1.SideEffect_SIDE_EFFECT_WRITE}}, 0, "side effect"},
		{"operation: RUNNING then SUCCEEDED", "CreateTicket", []*pluginv1.ActionResult{msg(pluginv1.Status_STATUS_RUNNING),
			msg(pluginv1.Status_STATUS_RUNNING), {Status: pluginv1.Status_STATUS_SUCCEEDED, Result: anyOf(t, created),
				EvidenceIds: []string{"ev-1"}, SideEffect: pluginv1.SideEffect_SIDE_EFFECT_WRITE, Cost: &pluginv1.Cost{Micros: 5}}}, -2, ""},
		{"RUNNING with evidence ids", "CreateTicket", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_RUNNING,
			EvidenceIds: []string{"ev-1"}}}, 0, "only status and diagnostics"},
		{"RUNNING with a stream item on a unary target", "CreateTicket", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_RUNNING,
			StreamItem: anyOf(t, created)}}, 0, "not server-streaming"},
		{"RUNNING over 64 KiB", "CreateTicket", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_RUNNING,
			Diagnostics: []*pluginv1.Diagnostic{{Message: big}}}}, 0, "larger than"},
		{"terminal over 4 MiB", "CreateTicket", []*pluginv1.ActionResult{{Status: pluginv1.Status_STATUS_FAILED,
			Diagnostics: []*pluginv1.Diagnostic{{Message: huge}}}}, 0, "larger than"},
		{"operation: no terminal", "CreateTicket", []*pluginv1.ActionResult{msg(pluginv1.Status_STATUS_RUNNING)}, -1, "without a terminal"},
		{"empty stream", "ListTickets", nil, -1, "without a message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rule := method(t, tt.method)
			c, err := NewStreamCheck(m, rule)
			if err != nil {
				t.Fatal(err)
			}
			var got error
			for _, r := range tt.stream {
				if err := c.Next(r); err != nil && got == nil {
					got = err
				}
			}
			if err := c.End(); got == nil {
				got = err
			}
			if tt.wantIndex == -2 {
				if got != nil {
					t.Fatalf("rejected: %v", got)
				}
				return
			}
			var se *StreamError
			if !errors.As(got, &se) || se.Index != tt.wantIndex || !strings.Contains(se.Reason, tt.want) {
				t.Fatalf("got %v, want index %d reason %q", got, tt.wantIndex, tt.want)
			}
		})
	}
}

func TestStreamCheckLimitsAndStickiness(t *testing.T) {
	m, rule := method(t, "CreateTicket")
	c, _ := NewStreamCheck(m, rule)
	for i := 0; i < MaxStreamMessages; i++ {
		if err := c.Next(msg(pluginv1.Status_STATUS_RUNNING)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	err := c.Next(msg(pluginv1.Status_STATUS_FAILED))
	var se *StreamError
	if !errors.As(err, &se) || se.Index != MaxStreamMessages {
		t.Fatalf("message 1025: %v", err)
	}
	// Sticky: a good message and End report the same failure.
	if err2 := c.Next(msg(pluginv1.Status_STATUS_FAILED)); err2 != err {
		t.Fatalf("not sticky: %v", err2)
	}
	if c.End() != err {
		t.Fatal("End does not report the first failure")
	}
}

func FuzzStreamCheck(f *testing.F) {
	seed, _ := proto.Marshal(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_RUNNING})
	f.Add(seed, seed)
	done, _ := proto.Marshal(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED, Diagnostics: []*pluginv1.Diagnostic{{Code: "x"}}})
	f.Add(seed, done)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		m, rule := method(t, "CreateTicket")
		c, _ := NewStreamCheck(m, rule)
		terminals := 0
		for _, raw := range [][]byte{a, b} {
			r := &pluginv1.ActionResult{}
			if proto.Unmarshal(raw, r) != nil {
				return
			}
			if c.Next(r) == nil && r.GetStatus() != pluginv1.Status_STATUS_RUNNING {
				terminals++
			}
		}
		if c.End() == nil && terminals != 1 {
			t.Fatalf("accepted a stream with %d terminal messages", terminals)
		}
	})
}
