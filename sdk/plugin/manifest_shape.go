package plugin

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// shapeError checks a decoded manifest document against the message it
// must fill and names the first field that does not fit — by its path,
// never its value, which is the package's (protojson's own errors quote
// it: `invalid value for uint32 field port: "password-hunter2"`). Only
// definite mismatches are reported; what passes is still decoded by
// protojson, whose refusal is then reported without its text.
func shapeError(doc any, md protoreflect.MessageDescriptor, path string) error {
	obj, ok := doc.(map[string]any)
	if !ok {
		if doc == nil {
			return nil
		}
		return fmt.Errorf("%s: must be a mapping", orTop(path))
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(k))
		}
		if fd == nil {
			return fmt.Errorf("%s: unknown field (known: %s)", orTop(path), knownFields(md))
		}
		p := join(path, string(fd.Name()))
		v := obj[k]
		switch {
		case v == nil:
		case fd.IsMap():
			// No map in a manifest today: protojson decides.
		case fd.IsList():
			list, ok := v.([]any)
			if !ok {
				return fmt.Errorf("%s: must be a list", p)
			}
			for i, e := range list {
				if err := shapeValue(fd, e, fmt.Sprintf("%s[%d]", p, i)); err != nil {
					return err
				}
			}
		default:
			if err := shapeValue(fd, v, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// shapeValue checks one value of fd (one element, for a list).
func shapeValue(fd protoreflect.FieldDescriptor, v any, path string) error {
	if v == nil {
		return nil
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
			return nil // well-known types have JSON forms of their own
		}
		return shapeError(v, fd.Message(), path)
	case protoreflect.StringKind, protoreflect.BytesKind:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: must be a string", path)
		}
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: must be true or false", path)
		}
	case protoreflect.EnumKind:
		switch v.(type) {
		case string, json.Number:
		default:
			return fmt.Errorf("%s: must be an enum name", path)
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		switch v.(type) {
		case string, json.Number:
		default:
			return fmt.Errorf("%s: must be a number", path)
		}
	default: // the integer kinds
		lo, hi := intRange(fd.Kind())
		if !integerIn(v, lo, hi) {
			return fmt.Errorf("%s: must be an integer from %s to %s", path, lo, hi)
		}
	}
	return nil
}

// intRange is the range of an integer kind.
func intRange(k protoreflect.Kind) (lo, hi *big.Int) {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return big.NewInt(math.MinInt32), big.NewInt(math.MaxInt32)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return big.NewInt(0), big.NewInt(math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return big.NewInt(0), new(big.Int).SetUint64(math.MaxUint64)
	default:
		return big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	}
}

// integerIn reports whether v (a number, or a string as protojson also
// takes) is an integer within [lo, hi].
func integerIn(v any, lo, hi *big.Int) bool {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = string(v)
	case string:
		s = v
	default:
		return false
	}
	f, ok := new(big.Float).SetPrec(256).SetString(s)
	if !ok || !f.IsInt() {
		return false
	}
	n, _ := f.Int(nil)
	return n.Cmp(lo) >= 0 && n.Cmp(hi) <= 0
}

func knownFields(md protoreflect.MessageDescriptor) string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		names[i] = string(md.Fields().Get(i).Name())
	}
	return strings.Join(names, ", ")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orTop(path string) string {
	if path == "" {
		return "manifest"
	}
	return path
}
