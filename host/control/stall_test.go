package control_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
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

// A caller that asks for an invocation and never reads its answer does
// not hold the call: the progress event that finds the connection's
// buffers full fails at the write timeout, the call is cancelled, and
// every goroutine the request started ends, while the caller still
// holds the connection open.
func TestStalledCallerCancelsCall(t *testing.T) {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	c := &chatty{stub: *newStub(), started: make(chan struct{}), cancelled: make(chan struct{})}
	if err := h.Add("chatty", host.KindExecuta, func(context.Context) (host.Runtime, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewHandler(h)
	ctl.SetWriteTimeout(300 * time.Millisecond)
	srv := httptest.NewUnstartedServer(asOperator(ctl))
	srv.Listener = testenv.SmallSendBuffers(srv.Listener)
	srv.Start()
	defer srv.Close()
	leaks := testenv.CheckGoroutines(t)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	body := `{"plugin":"chatty","method":"tool","input":{},"timeout":"1h"}`
	if _, err := fmt.Fprintf(conn, "POST /v1/invocations HTTP/1.1\r\nHost: control\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		what string
		ch   chan struct{}
	}{{"reach the plugin", c.started}, {"end", c.cancelled}} {
		select {
		case <-step.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("the call did not %s", step.what)
		}
	}
	// The connection stays open and unread while the goroutines are
	// counted.
	leaks()
}
