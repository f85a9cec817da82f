package host_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
)

// A host registers plugins of either kind by name and runs every call
// through one invoke path; a plugin that cannot start is marked, and the
// host keeps serving the others.
func ExampleHost() {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	err := h.Add("broken", host.KindExecuta, func(context.Context) (host.Runtime, error) {
		return nil, fmt.Errorf("%w: tools: at least one tool is required", host.ErrManifestInvalid)
	})
	fmt.Println("add:", err != nil)
	for _, s := range h.Status() {
		fmt.Println(s.Name, s.Kind, s.State)
	}
	_, err = h.Invoke(context.Background(), "broken", host.InvokeRequest{Method: "summarize"})
	fmt.Println("refused as failed:", errors.Is(err, host.ErrPluginFailed))
	// Output:
	// add: true
	// broken executa failed
	// refused as failed: true
}

// The host reads a provider's handshake line and checks every field before
// it dials the socket the line names.
func ExampleParseHandshakeLine() {
	l, err := host.ParseHandshakeLine("1|1|unix|/run/provider/p.sock|grpc")
	fmt.Println(l.AppVersion, l.Socket, err)
	_, err = host.ParseHandshakeLine("1|1|tcp|127.0.0.1:1234|grpc")
	fmt.Println(err)
	// Output:
	// 1 /run/provider/p.sock <nil>
	// handshake line: network-type: must be unix
}
