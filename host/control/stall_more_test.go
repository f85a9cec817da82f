package control_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// newChatty is a host with the chatty plugin and its control API, with
// a short write timeout; the host's evidence log is at *evidencePath.
func newChatty(t *testing.T, evidencePath *string) (*chatty, http.Handler) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := evidence.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if evidencePath != nil {
		*evidencePath = path
	}
	h := host.New(host.Options{Evidence: l, Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	c := newChattyPlugin()
	if err := h.Add("chatty", host.KindExecuta, func(context.Context) (host.Runtime, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewHandler(h)
	ctl.SetWriteTimeout(300 * time.Millisecond)
	return c, asOperator(ctl)
}

func waitCancelled(t *testing.T, c *chatty) {
	t.Helper()
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
}

// Over HTTP/2 (the handler served with TLS and h2) a caller that stops
// reading fills its stream's flow-control window instead of the
// connection's buffers: the write that waits for the window fails at the
// timeout all the same, the stream is reset and the call cancelled, and
// the connection (which other streams share) stays.
func TestStalledCallerCancelsCallHTTP2(t *testing.T) {
	c, handler := newChatty(t, nil)
	srv := httptest.NewUnstartedServer(handler)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	// The connection is up before the goroutines are counted.
	resp, err := client.Get(srv.URL + "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s", resp.Proto)
	}
	leaks := testenv.CheckGoroutines(t)
	resp, err = client.Post(srv.URL+"/v1/invocations", "application/json", strings.NewReader(chattyCall))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitCancelled(t, c)
	// The stream is reset; the connection serves on.
	next, err := client.Get(srv.URL + "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	next.Body.Close()
	if next.StatusCode != http.StatusOK {
		t.Fatalf("next request: %d", next.StatusCode)
	}
	resp.Body.Close()
	leaks()
}

// Over a unix socket (the control API's usual listener) the same: the
// stalled caller's call is cancelled while it holds the socket open, and
// the evidence has its outcome: cancelled.
func TestStalledCallerCancelsCallUnix(t *testing.T) {
	var evidencePath string
	c, handler := newChatty(t, &evidencePath)
	path := filepath.Join(t.TempDir(), "c.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	defer func() { srv.Close(); <-served }()
	leaks := testenv.CheckGoroutines(t)
	testenv.SendUnread(t, "unix", path, chattyRequest)
	waitCancelled(t, c)
	// The request's goroutines ended: the outcome was recorded before.
	leaks()
	b, err := os.ReadFile(evidencePath)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := 0
	for line := range strings.Lines(string(b)) {
		var rec struct {
			Type string `json:"type"`
			Data struct {
				Status string `json:"status"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type == "invocation.outcome" {
			outcomes++
			if rec.Data.Status != string(host.CallCancelled) {
				t.Errorf("outcome recorded %q, want %q", rec.Data.Status, host.CallCancelled)
			}
		}
	}
	if outcomes != 1 {
		t.Fatalf("%d outcomes in the evidence, want 1", outcomes)
	}
}

// A caller that keeps reading, a byte at a time, does not hold the call
// either: each write must be taken within the timeout, and a trickle
// takes none of the plugin's progress events in time.
func TestTrickleReaderCancelsCall(t *testing.T) {
	c, handler := newChatty(t, nil)
	srv := testenv.StartSmallBuffers(t, handler)
	leaks := testenv.CheckGoroutines(t)
	conn := testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(), chattyRequest)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		b := make([]byte, 1)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := conn.Read(b); err != nil {
				return
			}
		}
	}()
	waitCancelled(t, c)
	close(stop)
	<-trickled
	leaks()
}
