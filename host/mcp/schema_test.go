package mcp_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/known/timestamppb"

	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// What protojson writes of a message is valid under the message's schema
// (64-bit integers, enums, timestamps, maps, repeated and recursive
// messages), and a field the message does not have is not: the schema
// says what the host will decode.
func TestMessageSchema(t *testing.T) {
	msgs := []proto.Message{
		&pb.ActionContext{InvocationId: "i", Actor: &pb.Actor{Kind: "user", Principal: "p"},
			Deadline: timestamppb.Now(), Budget: &pb.Budget{MaxCostMicros: 1 << 40, MaxCalls: 3}, DryRun: true},
		&pb.LogRequest{Fields: map[string]string{"a": "b"}},
		&pb.ActionResult{Status: pb.Status_STATUS_FAILED, Diagnostics: []*pb.Diagnostic{{Code: "c", Path: "x[1]"}},
			EvidenceIds: []string{"e"}, Cost: &pb.Cost{Micros: -5, Unit: "usd"}},
		// DescriptorProto nests itself: the schema refers to its own $defs.
		protodesc.ToFileDescriptorProto(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto),
	}
	for _, m := range msgs {
		name := string(m.ProtoReflect().Descriptor().FullName())
		sch := compile(t, hostmcp.MessageSchema(m.ProtoReflect().Descriptor()))
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(instance(t, b)); err != nil {
			t.Errorf("%s: protojson's %s is invalid under its schema: %v", name, b, err)
		}
		if err := sch.Validate(instance(t, []byte(`{"noSuchField":1}`))); err == nil {
			t.Errorf("%s: the schema takes a field the message does not have", name)
		}
	}
	// The forms protojson reads besides what it writes.
	sch := compile(t, hostmcp.MessageSchema((&pb.Budget{}).ProtoReflect().Descriptor()))
	for _, in := range []string{`{"maxCalls":"3"}`, `{"maxCalls":3}`, `{"max_calls":3}`} {
		if err := protojson.Unmarshal([]byte(in), &pb.Budget{}); err != nil {
			t.Fatalf("protojson refuses %s: %v", in, err)
		}
		if in == `{"max_calls":3}` {
			// protojson takes the proto name too; the schema names the
			// JSON name only, which every client can send.
			continue
		}
		if err := sch.Validate(instance(t, []byte(in))); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}

func compile(t *testing.T, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	if err := c.AddResource("inline://schema.json", instance(t, raw)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("inline://schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return s
}

func instance(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
