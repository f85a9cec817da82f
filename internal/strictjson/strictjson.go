// Package strictjson refuses JSON that readers disagree on: an object
// with the same key twice, or with two keys that differ only in case.
//
// # Security
//
// encoding/json keeps the last of two equal keys and matches struct
// fields case-insensitively, while other readers keep the first or match
// exactly; a payload with {"a":1,"a":2,"A":3} means different things to
// the host, to an auditor's tool and to the plugin. Plugin payloads are
// checked before the host stores, records or acts on them, and a JWS
// header and claims set before the token verifier reads them
// (CheckObject). Errors give a byte offset, never a key or a value (both
// are the sender's).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// Errors of Check.
var (
	// ErrDuplicateKey: an object holds one key twice, or two keys equal
	// under Unicode simple case folding (encoding/json's matching).
	ErrDuplicateKey = errors.New("a duplicate or case-variant object key")
	// ErrInvalid: the input is not one valid JSON value.
	ErrInvalid = errors.New("not valid JSON")
)

// KeyError locates a duplicate or case-variant key.
type KeyError struct {
	// Offset is where the decoder stood before the key: the end of the
	// member before it (or of the opening brace).
	Offset int64
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("%s at byte %d", ErrDuplicateKey, e.Offset)
}

func (e *KeyError) Unwrap() error { return ErrDuplicateKey }

// Check returns nil for one valid JSON value whose every object has keys
// distinct under case folding, a *KeyError for the first key that is
// not, and ErrInvalid for anything json.Valid refuses.
func Check(b []byte) error {
	// Validity first, so that a key error is only ever reported for
	// input every reader can parse.
	if !json.Valid(b) {
		return ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := value(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrInvalid
	}
	return nil
}

// CheckObject is Check for one JSON object that is decoded into a
// struct whose JSON names are fields: it also refuses a top-level key
// that equals one of fields under case folding but not exactly.
// encoding/json would read {"ALG":…} into the field alg, where a reader
// that matches names exactly (RFC 7515, go-jose) sees an unknown member.
// A value that is not an object is ErrInvalid.
func CheckObject(b []byte, fields ...string) error {
	if !json.Valid(b) {
		return ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ErrInvalid
	}
	if err := object(dec, fields); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrInvalid
	}
	return nil
}

// value reads one value; objects and arrays are checked member by member.
func value(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return ErrInvalid
	}
	switch t {
	case json.Delim('{'):
		return object(dec, nil)
	case json.Delim('['):
		for dec.More() {
			if err := value(dec); err != nil {
				return err
			}
		}
		return closing(dec, ']')
	case json.Delim('}'), json.Delim(']'):
		return ErrInvalid
	}
	return nil
}

// object checks an object's members after its opening brace; a key that
// folds to one of fields must be spelled as it is.
func object(dec *json.Decoder, fields []string) error {
	seen := map[string]struct{}{}
	for dec.More() {
		off := dec.InputOffset()
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return ErrInvalid
		}
		f := fold(key)
		if _, dup := seen[f]; dup {
			return &KeyError{Offset: off}
		}
		for _, name := range fields {
			if key != name && f == fold(name) {
				return &KeyError{Offset: off}
			}
		}
		seen[f] = struct{}{}
		if err := value(dec); err != nil {
			return err
		}
	}
	return closing(dec, '}')
}

func closing(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil || t != d {
		return ErrInvalid
	}
	return nil
}

// fold maps a key to the smallest rune of each rune's simple case-fold
// orbit, as encoding/json does when it matches names: two keys fold alike
// exactly when bytes.EqualFold says they are equal.
func fold(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			out = append(out, byte(r))
			continue
		}
		out = utf8.AppendRune(out, foldRune(r))
	}
	return string(out)
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
