package executa

import (
	"context"
	"math"
	"testing"
)

func TestProgressLimits(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	// The plugin writes its events before its answer, and the host reads
	// stdout in order: every event is counted once Invoke returns.
	if _, err := p.Invoke(context.Background(), InvokeRequest{Tool: "progress"}); err != nil {
		t.Fatal(err)
	}
	kept, dropped := p.Progress()
	// 121 sent at once: the burst of 50 kept, the rest dropped but for what
	// the rate refilled meanwhile (bounded by the kept events' own times).
	if len(kept) == 0 {
		t.Fatal("no progress kept")
	}
	span := kept[len(kept)-1].At.Sub(kept[0].At).Seconds()
	if refill := int(math.Ceil(span*MaxProgressRate)) + 1; len(kept) < MaxProgressRate || len(kept) > MaxProgressRate+refill || len(kept)+dropped != 121 || dropped == 0 {
		t.Fatalf("kept %d dropped %d over %.3fs", len(kept), dropped, span)
	}
}
