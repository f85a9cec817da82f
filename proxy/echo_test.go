package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf16"
)

func TestRedactorAcrossReads(t *testing.T) {
	secret := "sk-live-0123456789abcdef"
	body := strings.Repeat("x", 40000) + secret + "middle" + secret + strings.Repeat("y", 70000) + secret
	for _, wrap := range []struct {
		name string
		r    func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte at a time", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
	} {
		t.Run(wrap.name, func(t *testing.T) {
			rd := newRedactor(wrap.r(strings.NewReader(body)), newEchoForms([]string{secret, "c2stbGl2ZS0wMTIzNDU2Nzg5YWJjZGVm"}))
			out, err := io.ReadAll(rd)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(body) {
				t.Fatalf("length %d, want %d (redaction must keep lengths)", len(out), len(body))
			}
			if bytes.Contains(out, []byte(secret)) {
				t.Fatal("secret passed the guard")
			}
			if rd.hits != 3 || strings.Count(string(out), Redaction) != 3 {
				t.Fatalf("hits %d, redactions %d", rd.hits, strings.Count(string(out), Redaction))
			}
		})
	}
}

func TestMask(t *testing.T) {
	if got := string(mask(14)); got != "[REDACTED]****" {
		t.Fatal(got)
	}
	if got := string(mask(7)); got != "*******" {
		t.Fatal(got)
	}
}

func FuzzRedactor(f *testing.F) {
	f.Add([]byte("prefix SECRET123 suffix"), "SECRET123", uint8(3))
	f.Add([]byte("SECRET123SECRET123"), "SECRET123", uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, secret string, chunk uint8) {
		if len(secret) < minEchoLen || strings.ContainsAny(secret, "*[]REDACT") {
			return
		}
		var src io.Reader = bytes.NewReader(body)
		if chunk > 0 {
			src = io.LimitReader(iotest.OneByteReader(src), int64(len(body)))
		}
		out, err := io.ReadAll(newRedactor(src, newEchoForms([]string{secret})))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(body) {
			t.Fatalf("length changed: %d -> %d", len(body), len(out))
		}
		if bytes.Contains(out, []byte(secret)) {
			t.Fatalf("secret survived in %q", out)
		}
	})
}

// The forms the guard derives from a value: every spelling an upstream
// that reformats what it got may echo is caught, for a one-line secret
// whose base64 differs between the alphabets and for a PEM key.
func TestEncodingsCatchDerivedForms(t *testing.T) {
	pemKey := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg+/abc\nZm9vYmFyYmF6cXV4/+0123456789==\n-----END PRIVATE KEY-----\n"
	for _, v := range []string{"wJalrXUtnFEMI/K7MDENG+bPxRfiCY>?>", pemKey, "AKIDAIRLOCKTEST01"} {
		j, _ := json.Marshal(v)
		js := string(j[1 : len(j)-1])
		crlf := strings.ReplaceAll(v, "\n", "\r\n")
		jc, _ := json.Marshal(crlf)
		for name, echo := range map[string]string{
			"raw": v, "base64": base64.StdEncoding.EncodeToString([]byte(v)), "base64 unpadded": base64.RawStdEncoding.EncodeToString([]byte(v)),
			"base64url": base64.URLEncoding.EncodeToString([]byte(v)), "base64url unpadded": base64.RawURLEncoding.EncodeToString([]byte(v)),
			"base64 of a longer text": base64.StdEncoding.EncodeToString([]byte(v + " and more")),
			"query-escaped":           url.QueryEscape(v), "path-escaped": url.PathEscape(v),
			"JSON-escaped": js, "JSON-escaped, slash escaped": strings.ReplaceAll(js, "/", `\/`),
			"CRLF": crlf, "CRLF JSON-escaped": string(jc[1 : len(jc)-1]),
		} {
			body := "before " + echo + " after"
			out, err := io.ReadAll(newRedactor(strings.NewReader(body), newEchoForms(encodings(v))))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), echo) || len(out) != len(body) {
				t.Errorf("%.12q… echoed %s passed the guard: %q", v, name, out)
			}
		}
	}
}

// The forms that escape every byte: each encoded by the standard library
// (or checked against its decoder) and caught.
func TestEncodingsCatchByteEscapedForms(t *testing.T) {
	for _, v := range []string{"sk-live-0123456789abcdef", "wJalrXUtnFEMI/K7MDENG+bPxRfiCY>?>", "clé-secrète-été"} {
		hexLower := hex.EncodeToString([]byte(v))
		var pct, uni strings.Builder
		for i := 0; i < len(hexLower); i += 2 {
			pct.WriteString("%" + hexLower[i:i+2])
		}
		for _, u := range utf16.Encode([]rune(v)) {
			fmt.Fprintf(&uni, `\u%04x`, u)
		}
		if dec, err := url.PathUnescape(pct.String()); err != nil || dec != v {
			t.Fatalf("percent form does not decode to the value: %v", err)
		}
		var dec string
		if err := json.Unmarshal([]byte(`"`+uni.String()+`"`), &dec); err != nil || dec != v {
			t.Fatalf("\\u form does not decode to the value: %v", err)
		}
		uniUpper := strings.ReplaceAll(strings.ToUpper(uni.String()), `\U`, `\u`)
		if err := json.Unmarshal([]byte(`"`+uniUpper+`"`), &dec); err != nil || dec != v {
			t.Fatalf("upper-case \\u form does not decode to the value: %v", err)
		}
		for name, echo := range map[string]string{
			"hex": hexLower, "HEX": strings.ToUpper(hexLower),
			"percent-encoded every byte": pct.String(), "PERCENT-ENCODED every byte": strings.ToUpper(pct.String()),
			`\u every character`: uni.String(), `\U every character (upper-case digits)`: uniUpper,
		} {
			body := "before " + echo + " after"
			for _, src := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body))} {
				out, err := io.ReadAll(newRedactor(src, newEchoForms(encodings(v))))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(out), echo) || len(out) != len(body) {
					t.Errorf("%.8q… echoed %s passed the guard: %q", v, name, out)
				}
			}
		}
	}
}
