package proxy

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// echoUpstream starts a rawServer for evil.example.org in f whose
// answers are built from the Authorization it got (the injected secret),
// and returns a handle of its own for it.
func echoUpstream(t *testing.T, f *fixture, answer func(auth string) string) (handle, base string) {
	t.Helper()
	port := rawServer(t, f.ca, "evil.example.org", func(_ int, r *http.Request, _ io.Writer) string {
		return answer(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	})
	f.res.set("evil.example.org", "127.0.0.1")
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-evil", Intent: "api.write",
		Destinations: []broker.Destination{{Host: "evil.example.org", Port: port}}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle, "http://evil.example.org:" + strconv.Itoa(port)
}

// getHead is an absolute-form GET of path under base (http://host:port)
// with handle h.
func getHead(base, path, h string) string {
	return "GET " + base + path + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(base, "http://") + "\r\n" +
		"Proxy-Authorization: Bearer " + h + "\r\n\r\n"
}

// An upstream that reflects the credential into a header or trailer
// NAME (which must be a token, as most API keys are) does not get it
// past the echo guard: the relay copies names as they are, and the
// parsers change their case (canonical form), so the guard drops a name
// that holds the secret in any case.
func TestEchoGuardHeaderAndTrailerNames(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct{ name, answer string }{
		{"header name", "HTTP/1.1 200 OK\r\nX-{s}: 1\r\nContent-Length: 2\r\n\r\nok"},
		{"header name, lower case", "HTTP/1.1 200 OK\r\nx-{s}: 1\r\nContent-Length: 2\r\n\r\nok"},
		{"announced trailer name", "HTTP/1.1 200 OK\r\nTrailer: X-{s}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-{s}: 1\r\n\r\n"},
		{"unannounced trailer name", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-{s}: 1\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, base := echoUpstream(t, f, func(secret string) string { return strings.ReplaceAll(tc.answer, "{s}", secret) })
			rc := dialRaw(t, f)
			rc.send(getHead(base, "/x", h))
			resp, body := rc.response("GET")
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			lower := strings.ToLower(testSecret)
			for _, hh := range []http.Header{resp.Header, resp.Trailer} {
				for k, vv := range hh {
					if strings.Contains(strings.ToLower(k), lower) || strings.Contains(strings.ToLower(strings.Join(vv, ",")), lower) {
						t.Fatalf("the secret reached the plugin in %q: %q", k, vv)
					}
				}
			}
		})
	}
}
