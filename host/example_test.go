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
