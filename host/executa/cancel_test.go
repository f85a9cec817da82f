package executa

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host/executa/sampling"
)

// Ending an invoke ends its in-flight sampling request all the way to the
// backend: the upstream sees its request cancelled (not at the proxy's
// 60 s response-header timeout), and the proxy's audit line for it is no
// 200.
func TestSamplingCancelledThroughTheProxy(t *testing.T) {
	f := newFixture(t)
	in, _ := f.b.Intent("openai")
	arrived, gone, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.setChat(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a hangup once the body is read
		close(arrived)
		select {
		case <-r.Context().Done():
			close(gone)
		case <-release:
			w.Write([]byte(`{"choices":[{"message":{"content":"late"}}]}`))
		}
	})
	f.sampling = &sampling.OpenAI{BaseURL: "http://api.example.com:" + strconv.Itoa(f.port) + "/v1", Model: "m", Intent: "openai",
		Destinations: in.Destinations, Broker: f.b, EgressProxy: f.proxy}
	p, err := Start(context.Background(), py("good"), Options{Broker: f.b, Secrets: f.b, Tokens: localMinter(f), Verifier: f.verifier,
		EgressProxy: f.proxy, Sampling: f.sampling, SamplingTimeout: 5 * time.Minute, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	// The caller gives up: its context ends while the backend is waited on.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Invoke(ctx, InvokeRequest{Tool: "reverse", Deadline: time.Now().Add(5 * time.Minute),
			Arguments: json.RawMessage(`{"method":"sampling/createMessage","params":` + ping + `}`)})
	}()
	select {
	case <-arrived:
	case <-done:
		t.Fatal("the invoke ended before its sampling call reached the upstream")
	}
	cancel()
	select {
	case <-gone:
	case <-time.After(2 * time.Minute):
		t.Fatal("the upstream request outlived its cancelled invoke")
	}
	<-done
	for !strings.Contains(f.audit.String(), "chat/completions") {
		time.Sleep(20 * time.Millisecond)
	}
	for _, line := range strings.Split(f.audit.String(), "\n") {
		if strings.Contains(line, "chat/completions") && strings.Contains(line, `"status":200`) {
			t.Fatalf("the cancelled call was audited as a 200: %s", line)
		}
	}
}
