package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func jsonString(t testing.TB, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func jsonFloat(t testing.TB, f float64) []byte {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct{ name, s string }{
		{"plain", "api.example.com"},
		{"quotes and backslashes", `a"b\c`},
		{"control characters", "\x00\x01\b\f\n\r\t\x1f\x7f"},
		{"html, not escaped", "<a href='x'>&amp;</a>"},
		{"line separators", "a\u2028b\u2029c"},
		{"invalid utf-8", "a\xffb\xc3(c\xed\xa0\x80"},
		{"multibyte", "é☃𝄞"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := AppendString(nil, tc.s), jsonString(t, tc.s); !bytes.Equal(got, want) {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.5, 12.345, 1e-6, 9.99e-7, 1.25e-7, 1e20, 1e21, 1.5e300, -2e-9, 123456789.125, math.SmallestNonzeroFloat64} {
		if got, want := AppendFloat(nil, f), jsonFloat(t, f); !bytes.Equal(got, want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

// FuzzAppendJSON: strings and floats encode as encoding/json encodes them.
func FuzzAppendJSON(f *testing.F) {
	f.Add("a\"b\\c\n\u2028\xff<>&", 1.25e-7)
	f.Add("", 0.0)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		if got, want := AppendString(nil, s), jsonString(t, s); !bytes.Equal(got, want) {
			t.Fatalf("string %q: got %s, want %s", s, got, want)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		if got, want := AppendFloat(nil, x), jsonFloat(t, x); !bytes.Equal(got, want) {
			t.Fatalf("float %v: got %s, want %s", x, got, want)
		}
	})
}
