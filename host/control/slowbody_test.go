package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A caller that sends an invocation's headers and then trickles or
// stops its body does not hold the request's goroutine: the body is
// read within the write timeout (per 64 KiB), and the caller has its
// answer, 408 body_timeout, and the connection closed, instead of a
// goroutine waiting on it for as long as it keeps the connection open.
func TestStalledBodyBounded(t *testing.T) {
	_, handler := newChatty(t, nil)
	srv := testenv.StartSmallBuffers(t, handler)
	leaks := testenv.CheckGoroutines(t)
	conn := testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(),
		"POST /v1/invocations HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\n"+
			"Content-Length: 1000\r\n\r\n{\"plugin\":")
	// A bound for the test, not the host's: the host's is 300ms.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || e.Error != "body_timeout" {
		t.Fatalf("stalled body: %d %q, want 408 body_timeout", resp.StatusCode, e.Error)
	}
	conn.Close()
	leaks()
}

// A caller that reads a large outcome just fast enough for each piece
// does not hold it past the call's timeout and one write timeout from
// its request, however late in its timeout the call answered: the
// outcome of a call that used most of an hour is not held for another
// hour.
func TestSlowReaderOfLateOutcomeBounded(t *testing.T) {
	const (
		size    = 8 << 20
		timeout = 10 * time.Second
		wt      = 3 * time.Second
	)
	h := host.New(host.Options{Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	if err := h.Add("big", host.KindExecuta, func(context.Context) (host.Runtime, error) {
		// It answers a second before its timeout.
		return newRuns(func(ctx context.Context, call host.Call) *host.Outcome {
			select {
			case <-time.After(timeout - time.Second):
			case <-ctx.Done():
			}
			return bigResult(call, size)
		}), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewHandler(h)
	ctl.SetWriteTimeout(wt)
	srv := testenv.StartSmallBuffers(t, asOperator(ctl))
	leaks := testenv.CheckGoroutines(t)
	call := fmt.Sprintf(`{"plugin":"big","method":"tool","input":{},"timeout":%q}`, timeout)
	start := time.Now()
	conn := testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(), fmt.Sprintf(
		"POST /v1/invocations HTTP/1.1\r\nHost: control\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(call), call))
	total := testenv.ReadSlowly(conn, size)
	if total >= size {
		t.Fatalf("the whole outcome (%d bytes) was delivered", total)
	}
	t.Logf("%d bytes in %v", total, time.Since(start))
	// The bound is timeout+wt (13 s); the outcome's own timeout after it
	// was ready would be 19 s.
	if took := time.Since(start); took > timeout+wt+3*time.Second {
		t.Fatalf("the outcome was held %v after the request, past its timeout and a write timeout", took)
	}
	leaks()
}

// A chunked body whose end arrives after its invocation started, and a
// call quiet for longer than the write timeout before its first event:
// what net/http then reads of the body (its end) is bounded from that
// event's write, not from the request's start, so it is read and the
// call goes on instead of being cancelled by a read deadline long past.
func TestChunkedBodyEndAfterQuietCall(t *testing.T) {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	// The plugin is told when its call starts, waits for goOn, reports
	// progress once, and succeeds unless its call was cancelled by then.
	started, goOn := make(chan struct{}), make(chan struct{})
	quiet := newRuns(func(ctx context.Context, call host.Call) *host.Outcome {
		close(started)
		<-goOn
		call.OnRunning(host.Progress{Diagnostics: []host.Diagnostic{{Code: "step", Message: "late"}}})
		status := host.CallSucceeded
		if ctx.Err() != nil {
			status = host.CallCancelled
		}
		return &host.Outcome{InvocationID: call.ID, Status: status}
	})
	if err := h.Add("quiet", host.KindExecuta, func(context.Context) (host.Runtime, error) { return quiet, nil }); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewHandler(h)
	const wt = 100 * time.Millisecond
	ctl.SetWriteTimeout(wt)
	srv := testenv.StartSmallBuffers(t, asOperator(ctl))
	call := `{"plugin":"quiet","method":"tool","input":{},"timeout":"1m"}`
	conn := testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(), fmt.Sprintf(
		"POST /v1/invocations HTTP/1.1\r\nHost: control\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
		len(call), call))
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not reach the plugin")
	}
	if _, err := conn.Write([]byte("0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// The call stays quiet past the write timeout (and the body's
	// deadline from the request's start).
	time.Sleep(3 * wt)
	close(goOn)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var last control.Event
	for dec := json.NewDecoder(resp.Body); dec.Decode(&last) == nil && last.Event != "outcome"; {
	}
	if last.Event != "outcome" || last.Status != string(host.CallSucceeded) {
		t.Fatalf("last event %+v, want a succeeded outcome", last)
	}
}
