package mcp

import (
	"encoding/json"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// MessageSchema is the JSON Schema of a protobuf message as protojson
// reads it, which is how the host decodes a plugin/v1 call's arguments:
// fields by their JSON names, 64-bit integers as numbers or strings,
// enums by name, bytes as base64, the well-known types in their JSON
// forms, extensions by their bracketed full names, and no unknown
// field. Nested message types are $defs, so a recursive type has a
// finite schema.
func MessageSchema(md protoreflect.MessageDescriptor) json.RawMessage {
	g := schemaGen{defs: map[string]any{}}
	top := g.message(md)
	if len(g.defs) > 0 {
		top["$defs"] = g.defs
	}
	b, _ := json.Marshal(top)
	return b
}

type schemaGen struct {
	defs map[string]any
}

// message is md's object schema, inline.
func (g *schemaGen) message(md protoreflect.MessageDescriptor) map[string]any {
	props := map[string]any{}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		props[fd.JSONName()] = g.field(fd)
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if md.ExtensionRanges().Len() > 0 {
		// protojson names an extension field by its full name in
		// brackets; which extensions exist is the resolver's, not md's.
		s["patternProperties"] = map[string]any{`^\[.+\]$`: map[string]any{}}
	}
	return s
}

// ref is a reference to md's schema in $defs, adding it on first use.
func (g *schemaGen) ref(md protoreflect.MessageDescriptor) map[string]any {
	if s, ok := wellKnown(md); ok {
		return s
	}
	name := string(md.FullName())
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = true // placeholder: a recursive type refers to itself
		g.defs[name] = g.message(md)
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

func (g *schemaGen) field(fd protoreflect.FieldDescriptor) any {
	switch {
	case fd.IsMap():
		return map[string]any{"type": "object", "additionalProperties": g.single(fd.MapValue())}
	case fd.IsList():
		return map[string]any{"type": "array", "items": g.single(fd)}
	default:
		return g.single(fd)
	}
}

// single is the schema of one value of fd's kind.
func (g *schemaGen) single(fd protoreflect.FieldDescriptor) map[string]any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return g.ref(fd.Message())
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		names := make([]string, 0, vals.Len())
		for i := range vals.Len() {
			names = append(names, string(vals.Get(i).Name()))
		}
		return map[string]any{"type": "string", "enum": names}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		// protojson also takes "NaN", "Infinity" and "-Infinity".
		return map[string]any{"type": []string{"number", "string"}}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		// protojson writes 64-bit integers as strings and reads both.
		return map[string]any{"type": []string{"integer", "string"}}
	default: // the 32-bit integer kinds
		return map[string]any{"type": "integer"}
	}
}

// wellKnown is the JSON form of a google.protobuf type protojson gives
// its own.
func wellKnown(md protoreflect.MessageDescriptor) (map[string]any, bool) {
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return map[string]any{"type": "string", "format": "date-time"}, true
	case "google.protobuf.Duration":
		return map[string]any{"type": "string", "pattern": `^-?[0-9]+(\.[0-9]+)?s$`}, true
	case "google.protobuf.FieldMask":
		return map[string]any{"type": "string"}, true
	case "google.protobuf.Struct":
		return map[string]any{"type": "object"}, true
	case "google.protobuf.ListValue":
		return map[string]any{"type": "array"}, true
	case "google.protobuf.Value":
		return map[string]any{}, true
	case "google.protobuf.Empty":
		return map[string]any{"type": "object", "additionalProperties": false}, true
	case "google.protobuf.Any":
		return map[string]any{"type": "object", "properties": map[string]any{"@type": map[string]any{"type": "string"}},
			"required": []string{"@type"}}, true
	case "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return map[string]any{"type": "string"}, true
	case "google.protobuf.BoolValue":
		return map[string]any{"type": "boolean"}, true
	case "google.protobuf.Int32Value", "google.protobuf.UInt32Value":
		return map[string]any{"type": "integer"}, true
	case "google.protobuf.Int64Value", "google.protobuf.UInt64Value":
		return map[string]any{"type": []string{"integer", "string"}}, true
	case "google.protobuf.FloatValue", "google.protobuf.DoubleValue":
		return map[string]any{"type": []string{"number", "string"}}, true
	}
	return nil, false
}
