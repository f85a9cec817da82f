package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
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
