package proxy

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/auditlog"
)

// stalledDisk is an audit output whose writes block until released.
type stalledDisk struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (d *stalledDisk) Write(p []byte) (int, error) {
	d.entered <- struct{}{}
	<-d.release
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.Write(p)
}

// When the audit output stalls past the writer's wait bound, the lines
// that could not be queued are counted, and the proxy sends nothing more
// upstream (503 audit_unavailable) until the output recovers and the gap
// is written into the audit log.
func TestProxyRefusesWhileTheAuditOutputIsStalled(t *testing.T) {
	disk := &stalledDisk{entered: make(chan struct{}, 100), release: make(chan struct{}, 100)}
	// Room for one line in the queue; a full queue drops at once.
	w := auditlog.New(disk, auditlog.Options{MaxQueued: 100, MaxWait: time.Nanosecond})
	defer w.Close()
	f := newFixtureWith(t, nil, fixtureOpts{auditSink: w})
	h := f.issue(t, "api.read", "inv-stall")
	c := f.client(h)
	get := func() (int, string) {
		code, errCode, _ := do(t, c, "GET", f.url("/x"), nil, "")
		return code, errCode
	}
	if code, _ := get(); code != http.StatusOK { // its line is in the stuck write
		t.Fatalf("first request: %d", code)
	}
	<-disk.entered
	for i := 0; !w.Saturated(); i++ { // queued, then dropped
		if code, _ := get(); code != http.StatusOK {
			t.Fatalf("request %d: %d before any line was dropped", i+2, code)
		}
	}
	sent := f.up.count()
	if w.Dropped() != 1 {
		t.Fatalf("dropped %d, want 1", w.Dropped())
	}
	if code, errCode := get(); code != http.StatusServiceUnavailable || errCode != CodeAuditUnavailable {
		t.Fatalf("while stalled: %d %s, want 503 %s", code, errCode, CodeAuditUnavailable)
	}
	if f.up.count() != sent {
		t.Fatal("a request went upstream while its audit line could not be written")
	}
	disk.release <- struct{}{} // the first batch
	<-disk.entered             // the queued line and the gap line
	disk.release <- struct{}{}
	for w.Saturated() {
		time.Sleep(time.Millisecond)
	}
	go func() {
		for range disk.entered {
			disk.release <- struct{}{}
		}
	}()
	if code, _ := get(); code != http.StatusOK {
		t.Fatalf("after recovery: %d", code)
	}
	_ = w.Close()
	close(disk.entered)
	disk.mu.Lock()
	out := disk.buf.String()
	disk.mu.Unlock()
	if !strings.Contains(out, `"msg":"audit_gap","log":"audit","dropped":1}`) {
		t.Fatalf("no gap line in the audit output:\n%s", out)
	}
	if n := strings.Count(out, `"msg":"egress"`); n != sent {
		t.Fatalf("%d egress lines, want %d (every request sent before the gap but the dropped one, and the one after)", n, sent)
	}
}
