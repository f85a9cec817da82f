package control_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// chatty is a plugin whose call sends progress until it is cancelled,
// and says when it was.
type chatty struct {
	*runs
	started, cancelled chan struct{}
}

func newChattyPlugin() *chatty {
	c := &chatty{started: make(chan struct{}), cancelled: make(chan struct{})}
	note := host.Diagnostic{Code: "progress", Message: strings.Repeat("p", 4<<10)}
	c.runs = newRuns(func(ctx context.Context, call host.Call) *host.Outcome {
		close(c.started)
		for ctx.Err() == nil {
			call.OnRunning(host.Progress{Diagnostics: []host.Diagnostic{note}})
		}
		close(c.cancelled)
		return &host.Outcome{InvocationID: call.ID, Status: host.CallCancelled}
	})
	return c
}

// chattyRequest is the HTTP/1.1 request of chattyCall, as a caller that
// then stops reading sends it.
var chattyRequest = fmt.Sprintf("POST /v1/invocations HTTP/1.1\r\nHost: control\r\nContent-Type: application/json\r\n"+
	"Content-Length: %d\r\n\r\n%s", len(chattyCall), chattyCall)

const chattyCall = `{"plugin":"chatty","method":"tool","input":{},"timeout":"1h"}`

// A caller that asks for an invocation and never reads its answer does
// not hold the call: the progress event that finds the connection's
// buffers full fails at the write timeout, the call is cancelled, and
// every goroutine the request started ends, while the caller still
// holds the connection open.
func TestStalledCallerCancelsCall(t *testing.T) {
	c, handler := newChatty(t, nil)
	srv := testenv.StartSmallBuffers(t, handler)
	leaks := testenv.CheckGoroutines(t)
	testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(), chattyRequest)
	waitCancelled(t, c)
	// The connection stays open and unread while the goroutines are
	// counted.
	leaks()
}

// A caller that reads a large outcome just fast enough for each piece to
// make the write timeout does not hold it (and the memory behind it)
// past the call's own timeout: the rest is cut off then, and the
// request's goroutines end while the caller still holds the connection.
func TestSlowReaderOfLargeOutcomeBounded(t *testing.T) {
	const size = 2 << 20
	h := host.New(host.Options{Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	if err := h.Add("big", host.KindExecuta, func(context.Context) (host.Runtime, error) {
		return newRuns(func(_ context.Context, call host.Call) *host.Outcome { return bigResult(call, size) }), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewHandler(h)
	ctl.SetWriteTimeout(10 * time.Second) // each piece is taken well within it
	srv := testenv.StartSmallBuffers(t, asOperator(ctl))
	leaks := testenv.CheckGoroutines(t)
	call := `{"plugin":"big","method":"tool","input":{},"timeout":"1s"}`
	conn := testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(), fmt.Sprintf(
		"POST /v1/invocations HTTP/1.1\r\nHost: control\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(call), call))
	// About 6 s for the whole answer at this rate.
	total := testenv.ReadSlowly(conn, size)
	if total >= size {
		t.Fatalf("the whole outcome (%d bytes) was delivered past the call's timeout", total)
	}
	leaks()
}
