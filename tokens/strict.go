package tokens

import (
	"reflect"
	"strings"
)

// A JWS header or claims set is read with encoding/json, which matches a
// member to a field ignoring case and keeps the last of duplicate
// members: {"ALG":…} or a second "alg" would be read where RFC 7515
// (member names unique, case-sensitive) and go-jose refuse the token.
// strictjson.CheckObject refuses them first.

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
