package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// waiters is how many requests wait for intent's fetch in progress.
func (c *tokenCache) waiters(intent string) int {
	sl := c.slot(intent)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.flight == nil {
		return 0
	}
	return sl.flight.waiters
}

// until polls cond (the test's own deadline bounds it).
func until(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
		runtime.Gosched()
	}
}

// Against a hung token endpoint, concurrent requests share one fetch
// and its failure: one fetch, every request answered with it.
func TestOAuth2HungEndpointSharedFailure(t *testing.T) {
	f, a := oauthFixture(t)
	a.set("hang")
	h := f.issueFor(t, "oauth.cc")
	c := f.client(h)
	c.Timeout = 0 // the test ends the fetch
	type answer struct {
		status int
		code   string
	}
	answers := make(chan answer, 4)
	for range 4 {
		go func() {
			resp, err := c.Get(a.apiURL("x"))
			if err != nil {
				answers <- answer{code: err.Error()}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get(HeaderError)}
		}()
	}
	until(func() bool { return f.proxy.tokens.waiters("oauth.cc") == 4 })
	close(a.release)
	for range 4 {
		if got := <-answers; got.status != http.StatusBadGateway || got.code != CodeTokenExchange {
			t.Errorf("a waiter got %d %q, want 502 %q", got.status, got.code, CodeTokenExchange)
		}
	}
	if n := a.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches for 4 concurrent requests, want 1", n)
	}
	if a.mu.Lock(); len(a.seenAPI) != 0 {
		t.Fatal("the API was called without a token")
	}
	a.mu.Unlock()
}

// When every request waiting for a fetch has gone, the fetch is
// cancelled: the token endpoint sees its client leave.
func TestOAuth2FetchCancelledWhenWaitersLeave(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, a := oauthFixtureWith(t, reg, nil)
	a.set("hang")
	h := f.issueFor(t, "oauth.cc")
	ctx, cancel := context.WithCancel(t.Context())
	codes := make(chan string, 3)
	for range 3 {
		go func() {
			// The handler as an embedding net/http server runs it: the
			// request's context ends when its client goes.
			req := httptest.NewRequest(http.MethodGet, a.apiURL("x"), nil).WithContext(ctx)
			req.Header.Set("Proxy-Authorization", "Bearer "+h)
			rec := httptest.NewRecorder()
			f.proxy.ServeHTTP(rec, req)
			codes <- rec.Header().Get(HeaderError)
		}()
	}
	until(func() bool { return f.proxy.tokens.waiters("oauth.cc") == 3 && a.fetches.Load() == 1 })
	cancel()
	for range 3 {
		if code := <-codes; code != CodeTokenEndpoint {
			t.Errorf("a request that left got %q", code)
		}
	}
	<-a.gone // the fetch was cancelled, not left to run out its deadline
	until(func() bool {
		return testutil.ToFloat64(f.proxy.metrics.tokenFetches.WithLabelValues("oauth.cc", "abandoned")) == 1
	})
	if n := a.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches, want 1", n)
	}
}

// A token endpoint that keeps failing (here: hanging past the fetch
// deadline) is asked again once at once, then not before
// refresh_backoff: the next request gets the last failure.
func TestOAuth2FailureBackoff(t *testing.T) {
	f, a := oauthFixtureWith(t, nil, func(c *Config) { c.Upstream.ResponseTimeout = 200 * time.Millisecond })
	a.set("hang")
	h := f.issueFor(t, "oauth.slow")
	for i := range 4 {
		if code, errCode, _ := do(t, f.client(h), http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusBadGateway || errCode != CodeTokenEndpoint {
			t.Fatalf("request %d: %d %q", i, code, errCode)
		}
	}
	if n := a.fetches.Load(); n != 2 {
		t.Fatalf("%d token fetches for 4 requests, want 2", n)
	}
	if got := strings.Count(f.audit.String(), `"token_cache":"backoff"`); got != 2 {
		t.Fatalf("%d requests answered from the backoff, want 2:\n%s", got, f.audit.String())
	}
}

// An API that answers 401 to every token gets a bounded number of
// fetches: the first refusal is retried with a new token, further ones
// wait for refresh_backoff, and meanwhile its 401 is the answer.
func TestOAuth2RefusedEverywhere(t *testing.T) {
	f, a := oauthFixture(t)
	a.set("api401")
	h := f.issueFor(t, "oauth.slow")
	for i := range 5 {
		if code, errCode, _ := do(t, f.client(h), http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusUnauthorized || errCode != "" {
			t.Fatalf("request %d: %d %q, want the API's 401", i, code, errCode)
		}
	}
	if n := a.fetches.Load(); n != 2 {
		t.Fatalf("%d token fetches for 5 refused requests, want 2", n)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seenAPI) != 6 {
		t.Fatalf("the API saw %d requests, want 6 (one retry)", len(a.seenAPI))
	}
}

// A 401 drops the token even when the request cannot be replayed (a
// body over 1 MiB, a chunked body): the plugin gets the 401, and its
// next request a fresh token.
func TestOAuth2RotatedTokenLargeUploads(t *testing.T) {
	f, a := oauthFixture(t)
	c := f.client(f.issueFor(t, "oauth.cc"))
	big := strings.Repeat("u", MaxReplayBody+1)
	upload := func(chunked bool) int {
		t.Helper()
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = struct{ io.Reader }{strings.NewReader(big)} // no length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, a.apiURL("upload"), body)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if chunked != (req.ContentLength <= 0) {
			t.Fatalf("the upload was not sent as meant (length %d)", req.ContentLength)
		}
		return resp.StatusCode
	}
	if code, _, _ := do(t, c, http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	for _, chunked := range []bool{false, true} {
		a.revokeAll() // the API rotates its tokens
		if code := upload(chunked); code != http.StatusUnauthorized {
			t.Fatalf("chunked %v: the upload with the revoked token got %d, want 401 (it cannot be replayed)", chunked, code)
		}
		if code := upload(chunked); code != http.StatusOK {
			t.Fatalf("chunked %v: the next upload got %d: the refused token was kept", chunked, code)
		}
	}
	if n := a.fetches.Load(); n != 3 {
		t.Fatalf("%d token fetches, want 3", n)
	}
}

// After a token endpoint outage, the first request that comes
// refresh_backoff after the last try gets a token: an outage does not
// double the backoff as refusals do. The cache's clock is stepped, so
// the outage's length is the test's, not the machine's.
func TestOAuth2RecoversAfterOutage(t *testing.T) {
	f, a := oauthFixture(t)
	var offset atomic.Int64
	base := time.Now()
	f.proxy.tokens.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	step := func(d time.Duration) { offset.Add(int64(d)) }
	h := f.issueFor(t, "oauth.cc") // refresh_backoff: the default, 1s
	a.set("unavailable")
	for i := range 20 { // a 20 s outage, a request a second
		if code, errCode, _ := do(t, f.client(h), http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusBadGateway || errCode != CodeTokenExchange {
			t.Fatalf("request %d during the outage: %d %q", i, code, errCode)
		}
		step(time.Second)
	}
	fetches := a.fetches.Load()
	if fetches != 20 {
		t.Fatalf("%d token fetches for 20 requests a second apart, want 20 (one per refresh_backoff)", fetches)
	}
	// Within refresh_backoff of the last try: the last failure, no fetch.
	step(-time.Second / 2)
	if code, _, _ := do(t, f.client(h), http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusBadGateway || a.fetches.Load() != fetches {
		t.Fatalf("a request within refresh_backoff: %d, %d fetches (want 502 from the backoff, %d)", code, a.fetches.Load(), fetches)
	}
	a.set("")
	step(time.Second / 2)
	if code, errCode, body := do(t, f.client(h), http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusOK {
		t.Fatalf("the first request after the endpoint is back: %d %q %.60q", code, errCode, body)
	}
}
