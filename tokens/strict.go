package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// A JWS header or claims set is read with encoding/json, which matches a
// member to a field ignoring case and keeps the last of duplicate
// members: {"ALG":…} or a second "alg" would be read where RFC 7515
// (member names unique, case-sensitive) and go-jose refuse the token.
// strictObject refuses them first.

var errNotStrict = errors.New("duplicate or case-variant member")

// headerFields and claimFields are the member names the verifier reads.
var (
	headerFields = jsonFieldNames(reflect.TypeFor[jwsHeader]())
	claimFields  = jsonFieldNames(reflect.TypeFor[wireClaims]())
)

// jsonFieldNames lists the JSON names of t's fields, embedded structs'
// included.
func jsonFieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			names = append(names, jsonFieldNames(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// strictObject checks that data is one JSON object whose member names
// are unique ignoring case, and name a field in fields only in its exact
// case.
func strictObject(data []byte, fields []string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errNotStrict
	}
	var seen [16]string
	names := seen[:0]
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		for _, f := range fields {
			if key != f && strings.EqualFold(key, f) {
				return errNotStrict
			}
		}
		for _, n := range names {
			if strings.EqualFold(key, n) {
				return errNotStrict
			}
		}
		names = append(names, key)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return errNotStrict
	}
	if _, err := dec.Token(); err != io.EOF {
		return errNotStrict
	}
	return nil
}

// compactJWS reports whether raw holds only the characters of a compact
// JWS: base64url and the dots. base64 decoding skips CR and LF, so
// "<token>\r\n" would otherwise verify.
func compactJWS(raw string) bool {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
