package proxy

import (
	"net/http"
	"strconv"
	"testing"
)

// A signing processor reads the whole body before it signs. A body that
// is malformed (a bad chunk size) is the client's fault, answered as the
// rest of the proxy answers it: 400 bad_request, not 413 as though it
// were too large; and nothing is sent upstream.
func TestSigningMalformedBody(t *testing.T) {
	f, v := processorFixture(t, nil)
	h := f.issueFor(t, "sig.hmac")
	hostPort := "sig.example.org:" + strconv.Itoa(v.port)
	rc := dialRaw(t, f)
	rc.send("POST http://" + hostPort + "/hmac/sha256/events HTTP/1.1\r\nHost: " + hostPort + "\r\nProxy-Authorization: Bearer " + h +
		"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
	resp, _ := rc.response("POST")
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderError) != CodeBadRequest {
		t.Fatalf("status %d %s, want 400 %s", resp.StatusCode, resp.Header.Get(HeaderError), CodeBadRequest)
	}
	select {
	case r := <-v.seen:
		t.Fatalf("the upstream saw %s %s", r.Method, r.URL.Path)
	default:
	}
}
