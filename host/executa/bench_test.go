package executa

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkSpawnToReady: spawn, initialize (v2) and describe of the Go
// test plugin.
func BenchmarkSpawnToReady(b *testing.B) {
	for b.Loop() {
		p, err := Start(context.Background(), PluginConfig{Name: "go-tool", Command: goPlugin}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p.Shutdown()
		b.StartTimer()
	}
}

// BenchmarkInvokeWarm: one invoke round trip on a running process.
func BenchmarkInvokeWarm(b *testing.B) {
	p, err := Start(context.Background(), PluginConfig{Name: "go-tool", Command: goPlugin}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown()
	req := InvokeRequest{Tool: "hello", Arguments: json.RawMessage(`{"who":"bench"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := p.Invoke(context.Background(), req); err != nil || !r.Success {
			b.Fatal(err)
		}
	}
}
