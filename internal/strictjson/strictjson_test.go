package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     error
	}{
		{"plain object", `{"a":1,"b":[{"a":2},{"a":3}],"c":{"a":{"b":null}}}`, nil},
		{"scalar", `"x"`, nil},
		{"same key in sibling objects", `[{"a":1},{"a":2}]`, nil},
		{"duplicate", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"case variant", `{"a":1,"A":3}`, ErrDuplicateKey},
		{"the issue's payload", `{"a":1,"a":2,"A":3}`, ErrDuplicateKey},
		{"escaped duplicate", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"kelvin sign folds to k", `{"k":1,"\u212a":2}`, ErrDuplicateKey},
		{"long s folds to s", `{"S":1,"ſ":2}`, ErrDuplicateKey},
		{"nested duplicate", `{"x":[1,{"y":{"id":1,"ID":2}}]}`, ErrDuplicateKey},
		{"trailing data", `{"a":1} {"b":2}`, ErrInvalid},
		{"unclosed", `{"a":1`, ErrInvalid},
		{"empty", ``, ErrInvalid},
		{"bad token", `{"a":tru}`, ErrInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.in))
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Check(%s) = %v, want %v", tt.in, err, tt.want)
			}
			if (err == nil || errors.Is(err, ErrDuplicateKey)) != json.Valid([]byte(tt.in)) {
				t.Fatalf("Check(%s) = %v disagrees with json.Valid", tt.in, err)
			}
		})
	}
	var ke *KeyError
	if err := Check([]byte(`{"secret-key":1,"SECRET-KEY":2}`)); !errors.As(err, &ke) || ke.Offset != 15 {
		t.Fatalf("got %v, want a KeyError at 15", err)
	}
}

// CheckObject refuses what Check refuses, anything but an object, and a
// top-level key that is a case variant of a field name even when alone
// (encoding/json would read it as the field); nested keys and keys that
// name no field keep Check's rule.
func TestCheckObject(t *testing.T) {
	fields := []string{"alg", "kid"}
	for _, tt := range []struct {
		name, in string
		want     error
	}{
		{"fields in their case", `{"alg":"EdDSA","kid":"k1","x":{"ALG":1}}`, nil},
		{"unknown keys in any case", `{"alg":"EdDSA","Typ":"JWT"}`, nil},
		{"case-variant field alone", `{"ALG":"EdDSA"}`, ErrDuplicateKey},
		{"case-variant field after", `{"alg":"EdDSA","Kid":"k1"}`, ErrDuplicateKey},
		{"kelvin sign in a field", `{"alg":"EdDSA","Kid":"k1"}`, ErrDuplicateKey},
		{"duplicate field", `{"alg":"none","alg":"EdDSA"}`, ErrDuplicateKey},
		{"nested duplicate", `{"alg":"EdDSA","x":{"a":1,"A":2}}`, ErrDuplicateKey},
		{"array", `[{"alg":"EdDSA"}]`, ErrInvalid},
		{"scalar", `"alg"`, ErrInvalid},
		{"trailing data", `{"alg":"EdDSA"}{}`, ErrInvalid},
		{"unclosed", `{"alg":"EdDSA"`, ErrInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckObject([]byte(tt.in), fields...)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("CheckObject(%s) = %v, want %v", tt.in, err, tt.want)
			}
		})
	}
}

// FuzzCheck holds Check to the standard library: it accepts only what
// json.Valid accepts, refuses as invalid only what json.Valid refuses,
// and what it accepts decodes, and re-encodes to something it accepts.
func FuzzCheck(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b)
		valid := json.Valid(b)
		switch {
		case err == nil && !valid, errors.Is(err, ErrDuplicateKey) && !valid:
			t.Fatalf("Check accepted input json.Valid refuses: %q (%v)", b, err)
		case errors.Is(err, ErrInvalid) && valid:
			t.Fatalf("Check called valid JSON invalid: %q", b)
		case err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrDuplicateKey):
			t.Fatalf("unexpected error %v", err)
		}
		if err == nil {
			var v any
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber() // 1E700 is valid JSON but no float64
			if dec.Decode(&v) != nil {
				t.Fatalf("accepted but does not decode: %q", b)
			}
			if re, _ := json.Marshal(v); Check(re) != nil {
				t.Fatalf("re-encoding of an accepted value refused: %q", re)
			}
		}
	})
}
