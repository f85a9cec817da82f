//go:build linux

package testenv

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// CheckGoroutines snapshots the running goroutines and returns a function
// that fails tb when, within a few seconds, goroutines started since the
// snapshot are still running: a server that does not stop what it started.
// Call it before starting the server and the result after stopping it.
func CheckGoroutines(tb testing.TB) func() {
	tb.Helper()
	before := goroutineIDs()
	return func() {
		tb.Helper()
		var extra []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			extra = extra[:0]
			for id, stack := range goroutineStacks() {
				if !before[id] && !benign(stack) {
					extra = append(extra, stack)
				}
			}
			if len(extra) == 0 {
				return
			}
		}
		tb.Errorf("%d goroutines leaked:\n%s", len(extra), strings.Join(extra, "\n\n"))
	}
}

// benign are goroutines of the runtime and the test framework, and the
// HTTP client's idle connections of the test's own requests.
func benign(stack string) bool {
	for _, s := range []string{"testing.(*T).Run", "testing.tRunner", "runtime.goexit", "os/signal.signal_recv",
		"net/http.(*persistConn)", "internal/poll.runtime_pollWait"} {
		if strings.Contains(stack, s) && !strings.Contains(stack, "airlock-dev/airlock") {
			return true
		}
	}
	return false
}

func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for id := range goroutineStacks() {
		ids[id] = true
	}
	return ids
}

func goroutineStacks() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		// "goroutine 12 [running]:"
		f := strings.Fields(head)
		if len(f) >= 2 {
			out[f[1]] = g
		}
	}
	return out
}
