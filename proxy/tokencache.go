package proxy

import (
	"context"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// tokenCache holds one access token per intent for the OAuth2
// processors, and runs their fetches.
//
// One fetch at a time per intent (single flight): requests that find no
// usable token wait for the fetch in progress and all get its token or
// its failure. A waiter whose request ends stops waiting; when the last
// one leaves, the fetch is cancelled. A fetch has its own deadline, so a
// hung token endpoint holds nobody longer than that.
//
// Refusals are bounded: an upstream 401 drops the token (drop), and the
// next request fetches a new one at once. If that one is refused too, or
// fetches fail in a row, each further fetch waits refresh_backoff after
// the previous one started, doubling up to maxRefreshBackoff; meanwhile
// requests are sent with the refused token (the upstream answers them)
// or get the last fetch's failure. A token the upstream accepts
// (accepted) ends the backoff.
//
// An outage is not a refusal: while the last fetch failed because the
// token endpoint could not be reached or answered 5xx, the wait stays at
// refresh_backoff, so the first request after the endpoint is back (and
// that much after the last try) gets a token, not the remainder of a
// doubled backoff.
type tokenCache struct {
	mu    sync.Mutex
	slots map[string]*tokenSlot
	now   func() time.Time // time.Now when nil; tests step it
}

// maxRefreshBackoff caps the wait between fetches of a refused intent.
const maxRefreshBackoff = 5 * time.Minute

type tokenSlot struct {
	mu      sync.Mutex
	version int // the secret version tok and the backoff belong to
	tok     *oauth2.Token
	refused bool // the upstream answered 401 to tok
	flight  *tokenFlight
	strikes int       // refusals and failed fetches since a token was accepted
	started time.Time // when the last fetch started
	lastErr error     // the last fetch's failure, while it is the latest news
	outage  bool      // lastErr says the endpoint is down, not that it refused
}

// tokenFlight is one fetch and the requests waiting for it.
type tokenFlight struct {
	done      chan struct{}
	version   int
	tok       *oauth2.Token
	err       error
	waiters   int
	abandoned bool // every waiter left; the result is not kept
	cancel    context.CancelFunc
}

// Where a token came from, for the audit line's token_cache.
const (
	tokenHit     = "hit"     // cached
	tokenMiss    = "miss"    // fetched (by this request or one it waited for)
	tokenBackoff = "backoff" // the refused token, or the last failure, during a backoff
)

// tokenRequest is what get needs to find or fetch a token.
type tokenRequest struct {
	intent  string
	version int
	skew    time.Duration // a token expiring sooner is renewed
	backoff time.Duration // refresh_backoff
	timeout time.Duration // a fetch's deadline
	fetch   func(ctx context.Context) (*oauth2.Token, error)
}

func (c *tokenCache) slot(intent string) *tokenSlot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots == nil {
		c.slots = map[string]*tokenSlot{}
	}
	sl := c.slots[intent]
	if sl == nil {
		sl = &tokenSlot{}
		c.slots[intent] = sl
	}
	return sl
}

// get returns the intent's token for q.version, fetching one (or
// waiting for the fetch in progress) when none is usable. It returns
// early with ctx's error if ctx ends first.
func (c *tokenCache) get(ctx context.Context, q tokenRequest) (*oauth2.Token, string, error) {
	sl := c.slot(q.intent)
	sl.mu.Lock()
	now := c.clock()
	if sl.version != q.version {
		// A new secret version: its tokens and refusals start afresh.
		sl.version, sl.tok, sl.refused, sl.strikes, sl.lastErr, sl.outage = q.version, nil, false, 0, nil, false
	}
	if sl.tok != nil && !sl.refused && sl.tok.Expiry.Sub(now) > q.skew {
		tok := sl.tok
		sl.mu.Unlock()
		return tok, tokenHit, nil
	}
	fl := sl.flight
	if fl == nil || fl.version != q.version {
		wait := refreshWait(sl.strikes, q.backoff)
		if sl.outage {
			wait = min(wait, q.backoff)
		}
		if sl.strikes > 1 && now.Before(sl.started.Add(wait)) {
			if sl.tok != nil && now.Before(sl.tok.Expiry) {
				tok := sl.tok
				sl.mu.Unlock()
				return tok, tokenBackoff, nil
			}
			if err := sl.lastErr; err != nil {
				sl.mu.Unlock()
				return nil, tokenBackoff, err
			}
		}
		fl = sl.start(q, now, c.clock)
	}
	fl.waiters++
	sl.mu.Unlock()
	select {
	case <-fl.done:
		return fl.tok, tokenMiss, fl.err
	case <-ctx.Done():
		sl.mu.Lock()
		defer sl.mu.Unlock()
		select {
		case <-fl.done:
			return fl.tok, tokenMiss, fl.err
		default:
		}
		if fl.waiters--; fl.waiters == 0 {
			fl.abandoned = true
			fl.cancel()
			if sl.flight == fl {
				sl.flight = nil
			}
		}
		return nil, tokenMiss, ctx.Err()
	}
}

// clock is the cache's time.
func (c *tokenCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// start begins a fetch for q at now; sl.mu is held.
func (sl *tokenSlot) start(q tokenRequest, now time.Time, clock func() time.Time) *tokenFlight {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	fl := &tokenFlight{done: make(chan struct{}), version: q.version, cancel: cancel}
	sl.flight, sl.started = fl, now
	go func() {
		defer cancel()
		tok, err := q.fetch(ctx)
		if err == nil && tok.Expiry.IsZero() {
			tok.Expiry = clock().Add(noExpiryLife + q.skew)
		}
		sl.mu.Lock()
		fl.tok, fl.err = tok, err
		if sl.flight == fl {
			sl.flight = nil
		}
		if !fl.abandoned && fl.version == sl.version {
			if err == nil {
				sl.tok, sl.refused, sl.lastErr, sl.outage = tok, false, nil, false
			} else {
				sl.strikes++
				sl.lastErr, sl.outage = err, tokenEndpointDown(err)
			}
		}
		sl.mu.Unlock()
		close(fl.done)
	}()
	return fl
}

// refreshWait is how long after the previous fetch started the next may
// start, after strikes refusals or failures in a row.
func refreshWait(strikes int, base time.Duration) time.Duration {
	if strikes <= 1 {
		return 0
	}
	d := base << min(strikes-2, 16)
	return min(d, max(base, maxRefreshBackoff))
}

// drop marks intent's token refused if it is still access (the upstream
// answered 401 to it): the next request fetches a new one, within the
// backoff.
func (c *tokenCache) drop(intent, access string) {
	sl := c.slot(intent)
	sl.mu.Lock()
	if sl.tok != nil && sl.tok.AccessToken == access && !sl.refused {
		sl.refused = true
		sl.strikes++
	}
	sl.mu.Unlock()
}

// accepted records that the upstream took access (it did not answer
// 401): a backoff ends.
func (c *tokenCache) accepted(intent, access string) {
	sl := c.slot(intent)
	sl.mu.Lock()
	if sl.strikes != 0 && sl.tok != nil && sl.tok.AccessToken == access {
		sl.strikes, sl.refused, sl.lastErr, sl.outage = 0, false, nil, false
	}
	sl.mu.Unlock()
}
