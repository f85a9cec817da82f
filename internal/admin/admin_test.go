package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func readyz(t *testing.T, s *Server) (int, []string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var body struct {
		Failed []string `json:"failed"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("readyz body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, body.Failed
}

func newServer() *Server { return New(prometheus.NewRegistry(), slog.New(slog.DiscardHandler)) }

// Each check gets the documented time (CheckTimeout, 1 s by default) and
// no more: the old code gave all of them together 5 s, so a stalled
// Vault took 5 s to show where the docs said 2 s.
func TestReadyzCheckDeadline(t *testing.T) {
	s := newServer()
	var left time.Duration
	s.AddCheck("deadline", func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		if !ok {
			return errors.New("no deadline")
		}
		left = time.Until(dl)
		return nil
	})
	if code, failed := readyz(t, s); code != http.StatusOK {
		t.Fatalf("readyz %d %v", code, failed)
	}
	if left > DefaultCheckTimeout {
		t.Fatalf("a check may take %s, more than DefaultCheckTimeout %s", left, DefaultCheckTimeout)
	}
}

// Checks run at once: two checks that each wait for the other to start
// both pass. A check that never answers (ignoring its context) fails by
// name without holding the answer back.
func TestReadyzChecksInParallel(t *testing.T) {
	s := newServer()
	s.CheckTimeout = time.Minute // the paired checks need no time; the hung one is never answered
	a, b := make(chan struct{}), make(chan struct{})
	pair := func(mine, other chan struct{}) Check {
		return func(ctx context.Context) error {
			close(mine)
			select {
			case <-other:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	s.AddCheck("a", pair(a, b))
	s.AddCheck("b", pair(b, a))
	if code, failed := readyz(t, s); code != http.StatusOK {
		t.Fatalf("paired checks: readyz %d %v", code, failed)
	}

	s = newServer()
	s.CheckTimeout = 50 * time.Millisecond
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	s.AddCheck("hung", func(context.Context) error { <-hung; return nil })
	code, failed := readyz(t, s)
	if code != http.StatusServiceUnavailable || len(failed) != 1 || failed[0] != "hung" {
		t.Fatalf("a hung check: readyz %d %v", code, failed)
	}
}

// A check that fails with NotReady has its items named under its name;
// any other failure's text stays out of the answer.
func TestReadyzNamesWhatIsNotReady(t *testing.T) {
	s := newServer()
	s.AddCheck("plugins", func(context.Context) error {
		return &NotReady{What: "plugins not serving", Items: []string{"c4.revoker"}}
	})
	s.AddCheck("vault", func(context.Context) error { return errors.New("dial 10.0.0.7: secret-ish detail") })
	rec := httptest.NewRecorder()
	s.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var body struct {
		Failed   []string            `json:"failed"`
		NotReady map[string][]string `json:"not_ready"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusServiceUnavailable || len(body.Failed) != 2 || len(body.NotReady) != 1 ||
		len(body.NotReady["plugins"]) != 1 || body.NotReady["plugins"][0] != "c4.revoker" {
		t.Fatalf("readyz %d %s", rec.Code, rec.Body.String())
	}
	if strings.Contains(rec.Body.String(), "10.0.0.7") {
		t.Fatalf("an error's text reached the answer: %s", rec.Body.String())
	}
}
