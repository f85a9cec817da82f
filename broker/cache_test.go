package broker

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

type fakeSource struct {
	mu   sync.Mutex
	data SecretData
	err  error
}

func (f *fakeSource) Read(context.Context, SecretRef) (SecretData, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.data, f.err
}

func (f *fakeSource) set(d SecretData, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data, f.err = d, err
}

var ref = SecretRef{Source: "fake", Path: "p", Field: "f"}

func TestCacheSingleFlight(t *testing.T) {
	src := &countingSource{SecretSource: &fakeSource{data: SecretData{Fields: map[string]string{"f": "v"}, Version: 3}}, delay: 20 * time.Millisecond}
	c := NewSecretCache(map[string]SecretSource{"fake": src}, time.Minute, 0, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.Get(context.Background(), ref, false)
			if err == nil && d.Version != 3 {
				err = errors.New("wrong version")
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("1000 concurrent misses made %d reads, want 1", n)
	}
}

func TestCacheTTLInvalidateAndFresh(t *testing.T) {
	clk := newClock()
	fs := &fakeSource{data: SecretData{Fields: map[string]string{"f": "v1"}, Version: 1}}
	src := &countingSource{SecretSource: fs}
	c := NewSecretCache(map[string]SecretSource{"fake": src}, 30*time.Second, 0, nil, nil)
	c.now = clk.Now
	get := func() SecretData {
		t.Helper()
		d, err := c.Get(context.Background(), ref, false)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	get()
	fs.set(SecretData{Fields: map[string]string{"f": "v2"}, Version: 2}, nil)
	if d := get(); d.Version != 1 || src.reads.Load() != 1 {
		t.Fatalf("within TTL: version %d, reads %d", d.Version, src.reads.Load())
	}
	clk.Advance(31 * time.Second)
	if d := get(); d.Version != 2 || src.reads.Load() != 2 {
		t.Fatalf("after TTL: version %d, reads %d", d.Version, src.reads.Load())
	}
	fs.set(SecretData{Fields: map[string]string{"f": "v3"}, Version: 3}, nil)
	c.invalidate()
	if d := get(); d.Version != 3 {
		t.Fatalf("after Invalidate: version %d", d.Version)
	}
	fs.set(SecretData{Fields: map[string]string{"f": "v4"}, Version: 4}, nil)
	// Within MinFreshInterval of the last read, fresh answers from it.
	reads := src.reads.Load()
	for i := 0; i < 100; i++ {
		if d, err := c.Get(context.Background(), ref, true); err != nil || d.Version != 3 {
			t.Fatalf("fresh within the interval: %v %v", d.Version, err)
		}
	}
	if src.reads.Load() != reads {
		t.Fatalf("100 fresh Gets within %s made %d source reads, want 0", MinFreshInterval, src.reads.Load()-reads)
	}
	clk.Advance(MinFreshInterval)
	d, err := c.Get(context.Background(), ref, true)
	if err != nil || d.Version != 4 || src.reads.Load() != reads+1 {
		t.Fatalf("fresh: %v %v", d.Version, err)
	}
	if get().Version != 4 {
		t.Fatal("a fresh read did not refresh the cache")
	}
}

func TestCacheFailsClosedOrServesStale(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stale     time.Duration
		advance   time.Duration
		wantStale bool
	}{
		{name: "fail closed by default", stale: 0, advance: 31 * time.Second},
		{name: "stale within window", stale: time.Minute, advance: 61 * time.Second, wantStale: true},
		{name: "stale window over", stale: time.Minute, advance: 91 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			fs := &fakeSource{data: SecretData{Fields: map[string]string{"f": "v"}, Version: 7}}
			c := NewSecretCache(map[string]SecretSource{"fake": fs}, 30*time.Second, tt.stale, nil, nil)
			c.now = clk.Now
			if _, err := c.Get(context.Background(), ref, false); err != nil {
				t.Fatal(err)
			}
			fs.set(SecretData{}, ErrSecretUnavailable)
			clk.Advance(tt.advance)
			d, err := c.Get(context.Background(), ref, false)
			if tt.wantStale {
				if err != nil || d.Version != 7 {
					t.Fatalf("want stale v7, got %v %v", d.Version, err)
				}
				return
			}
			if !errors.Is(err, ErrSecretUnavailable) {
				t.Fatalf("err = %v, want ErrSecretUnavailable", err)
			}
		})
	}
}

func TestCacheUnknownSource(t *testing.T) {
	c := NewSecretCache(map[string]SecretSource{}, time.Minute, 0, nil, nil)
	if _, err := c.Get(context.Background(), ref, false); !errors.Is(err, ErrSecretUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestFileSource(t *testing.T) {
	ctx := context.Background()
	p := writeSecrets(t, "a/b: {token: one}\n")
	fs := &FileSource{Path: p}
	d, err := fs.Read(ctx, SecretRef{Path: "a/b"})
	if err != nil || d.Fields["token"] != "one" || d.Version != 1 {
		t.Fatalf("read: %+v %v", d, err)
	}
	if err := os.WriteFile(p, []byte("a/b: {token: two}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, _ := fs.Read(ctx, SecretRef{Path: "a/b"}); d.Fields["token"] != "two" || d.Version != 2 {
		t.Fatalf("after the file changed: %+v", d)
	}
	if err := fs.Reload(); err != nil {
		t.Fatal(err)
	}
	if d, _ := fs.Read(ctx, SecretRef{Path: "a/b"}); d.Version != 2 {
		t.Fatalf("a reload of unchanged content bumped the version: %+v", d)
	}
	if _, err := fs.Read(ctx, SecretRef{Path: "x"}); !errors.Is(err, ErrSecretNotFound) {
		t.Fatalf("missing path: %v", err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := fs.Reload(); !errors.Is(err, ErrSecretUnavailable) {
		t.Fatalf("group-readable file: %v", err)
	}
	if _, err := fs.Read(ctx, SecretRef{Path: "a/b"}); !errors.Is(err, ErrSecretUnavailable) {
		t.Fatalf("read after the file became group-readable: %v (must fail closed)", err)
	}
	bad := writeSecrets(t, "a/b: [not, a, map, hunter2]\n")
	_, err = (&FileSource{Path: bad}).Read(ctx, SecretRef{Path: "a/b"})
	if !errors.Is(err, ErrSecretUnavailable) || containsAny(err.Error(), "hunter2") {
		t.Fatalf("malformed file: %v", err)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if len(sub) > 0 && len(s) >= len(sub) {
			for i := 0; i+len(sub) <= len(s); i++ {
				if s[i:i+len(sub)] == sub {
					return true
				}
			}
		}
	}
	return false
}
