package aps

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// openStore opens a store in a temporary directory on a clock the test
// moves.
func openStore(t *testing.T) (*Store, *testenv.Clock) {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state", "aps.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	clk := testenv.NewClock()
	s.Now = clk.Now
	return s, clk
}

func TestStoreValues(t *testing.T) {
	s, clk := openStore(t)
	if _, ok := s.Get("user/u1", "k"); ok {
		t.Fatal("a value in an empty store")
	}
	etag, err := s.Set("user/u1", "k", json.RawMessage(`{"n":1}`), 0, nil)
	if err != nil || etag == "" {
		t.Fatalf("set: %q %v", etag, err)
	}
	if v, ok := s.Get("user/u1", "k"); !ok || string(v.Data) != `{"n":1}` || v.ETag != etag {
		t.Fatalf("get: %+v %v", v, ok)
	}
	if _, ok := s.Get("user/u2", "k"); ok {
		t.Fatal("another owner reads the value")
	}
	stale := "not-the-etag"
	if _, err := s.Set("user/u1", "k", json.RawMessage(`2`), 0, &stale); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("stale if-match: %v", err)
	}
	next, err := s.Set("user/u1", "k", json.RawMessage(`2`), 0, &etag)
	if err != nil || next == etag {
		t.Fatalf("matching if-match: %q %v", next, err)
	}
	// A TTL ends the value on the store's clock.
	if _, err := s.Set("user/u1", "short", json.RawMessage(`3`), 10, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second)
	if _, ok := s.Get("user/u1", "short"); ok {
		t.Fatal("an expired value is read")
	}
	if deleted, err := s.Delete("user/u1", "short"); err != nil || deleted {
		t.Fatalf("delete of an expired value: %v %v", deleted, err)
	}
	if deleted, err := s.Delete("user/u1", "k"); err != nil || !deleted {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if u := s.Usage("user/u1"); u != 0 {
		t.Fatalf("usage %d after every value is gone", u)
	}
}

// A listing is in key order, within the prefix, a page at a time.
func TestStoreList(t *testing.T) {
	s, _ := openStore(t)
	for _, k := range []string{"a/3", "a/1", "b/1", "a/2"} {
		if _, err := s.Set("app/x", k, json.RawMessage(`0`), 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(items []Item) string {
		var ks []string
		for _, it := range items {
			ks = append(ks, it.Key)
		}
		return strings.Join(ks, ",")
	}
	page, more := s.List("app/x", "a/", "", 2)
	if keys(page) != "a/1,a/2" || !more {
		t.Fatalf("first page: %s %v", keys(page), more)
	}
	page, more = s.List("app/x", "a/", page[1].Key, 2)
	if keys(page) != "a/3" || more {
		t.Fatalf("second page: %s %v", keys(page), more)
	}
	if page, _ := s.List("app/none", "", "", 10); page == nil || len(page) != 0 {
		t.Fatalf("an empty listing: %#v", page)
	}
}

// Values count against their owner's quota; a write past it changes
// nothing, and a delete gives the bytes back.
func TestStoreQuota(t *testing.T) {
	s, _ := openStore(t)
	s.Quota = 200
	v := json.RawMessage(`"` + strings.Repeat("q", 100) + `"`)
	if _, err := s.Set("user/q", "a", v, 0, nil); err != nil {
		t.Fatal(err)
	}
	used := s.Usage("user/q")
	if _, err := s.Set("user/q", "b", v, 0, nil); !errors.Is(err, ErrQuota) {
		t.Fatalf("past the quota: %v", err)
	}
	if _, ok := s.Get("user/q", "b"); ok || s.Usage("user/q") != used {
		t.Fatal("a refused write changed the store")
	}
	if _, err := s.Set("user/other", "b", v, 0, nil); err != nil {
		t.Fatalf("another owner's quota: %v", err)
	}
	if _, err := s.Delete("user/q", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("user/q", "b", v, 0, nil); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

// Values survive a restart.
func TestStoreReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aps.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("tool/p", "k", json.RawMessage(`"kept"`), 0, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, ok := s.Get("tool/p", "k"); !ok || string(v.Data) != `"kept"` {
		t.Fatalf("after reopening: %+v %v", v, ok)
	}
}

// A second host on the same state directory is told why it cannot open
// the store, not just "timeout".
func TestStoreLockedByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aps.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second open: %v", err)
	}
}

// A store its group or others may write (copied in, chmodded) is refused:
// they could change what plugins stored.
func TestStoreRefusesAFileOthersMayWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aps.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); !errors.Is(err, fsutil.ErrPlanted) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a store anyone may write: %v", err)
	}
}
