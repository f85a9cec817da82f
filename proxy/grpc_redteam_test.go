package proxy

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// gRPC binary metadata (a "-bin" key) travels base64-encoded, and the
// client decodes it: an upstream that echoes the authorization metadata
// ("Bearer <secret>", the secret 7 bytes in, so not on a base64 group
// boundary) in a binary trailer must not hand the plugin the secret.
func TestGRPCBinaryTrailerEchoGuarded(t *testing.T) {
	g := newGRPCFixture(t)
	c := grpcClients()[0] // grpc-go
	h := g.issueGRPC(t, "api.write", "inv-grpc-bin")
	r := g.run(t, c, g.target(), h, "echo-bin", "", nil)["echo-bin"]
	// A redacted binary value no longer decodes, which the client may
	// report as a failed call; either way the secret must not arrive.
	part := testSecret[:len(testSecret)-2]
	if v := r.Trailer["x-echo-bin"]; strings.Contains(v, part) || strings.Contains(r.Message, part) {
		t.Fatalf("the binary trailer carries the secret: %+v", r)
	}
	t.Logf("client saw %+v", r)
}

// Base64 of a text holding the secret at any offset is caught, in both
// alphabets, padded or not, for short and long secrets.
func TestEncodingsCatchBase64AtAnyOffset(t *testing.T) {
	for _, v := range []string{"abc123", testSecret, "wJalrXUtnFEMI/K7MDENG+bPxRfiCY>?>"} {
		ef := newEchoForms(encodings(v))
		for pre := range 3 {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
				for post := range 3 {
					echo := enc.EncodeToString([]byte(strings.Repeat("B", pre) + v + strings.Repeat("!", post)))
					h := http.Header{"X-Echo-Bin": {echo}}
					if redactHeaders(h, ef) == 0 {
						t.Errorf("%q after %d bytes, then %d: %s passed the guard", v, pre, post, echo)
					}
				}
			}
		}
	}
}

// A grpc-message trailer is percent-encoded (bytes outside printable
// ASCII, and '%') and decoded by the client: a secret holding such a
// byte is caught in that form, which neither URL escaping matches.
func TestEncodingsCatchGRPCMessage(t *testing.T) {
	v := "pa%ss/wo+rd=\u00e9x"
	msg := "upstream said: " + strings.ReplaceAll(strings.ReplaceAll(v, "%", "%25"), "\u00e9", "%C3%A9")
	h := http.Header{"Grpc-Message": {msg}}
	if redactHeaders(h, newEchoForms(encodings(v))) == 0 || strings.Contains(h.Get("Grpc-Message"), "%25ss/wo+rd=%C3%A9x") {
		t.Fatalf("the percent-encoded secret passed the guard: %q", h.Get("Grpc-Message"))
	}
}
