package control_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// chatty is a stub whose call sends progress until it is cancelled, and
// says when it was.
type chatty struct {
	stub
	started, cancelled chan struct{}
}

func (c *chatty) Prepare(host.InvokeRequest) (host.Action, error) { return chattyAction{c}, nil }

type chattyAction struct{ c *chatty }

func (chattyAction) Risk() policy.Risk { return policy.RiskRead }

func (a chattyAction) Run(ctx context.Context, call host.Call) *host.Outcome {
	close(a.c.started)
	note := host.Diagnostic{Code: "progress", Message: strings.Repeat("p", 4<<10)}
	for ctx.Err() == nil {
		call.OnRunning(host.Progress{Diagnostics: []host.Diagnostic{note}})
	}
	close(a.c.cancelled)
	return &host.Outcome{InvocationID: call.ID, Status: host.CallCancelled}
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
