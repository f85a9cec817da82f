package executa

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/redact"
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

// An invoke's caller sees the progress events that belong to it, in
// order and before Invoke returns, as the host reads them: an event for
// an invoke not in flight stays in the log only, and a credential in
// the plugin's text is redacted.
func TestProgressReachesCaller(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []host.Diagnostic // written by the sink's goroutine, read after Invoke returned
	if _, err := p.Invoke(context.Background(), InvokeRequest{Tool: "progress_sdk",
		OnProgress: func(e ProgressEvent) { seen = append(seen, e.Diagnostic(nil)) }}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0].Code != "tool_update" || !strings.HasPrefix(seen[0].Message, "step 1 of 2") ||
		!strings.Contains(seen[0].Message, "alh_"+redact.Mask) || strings.Contains(seen[0].Message, "A1b2C3d4") ||
		seen[1].Code != "progress" || seen[1].Message != `{"step":2,"total":2}` {
		t.Fatalf("the caller saw %q", seen)
	}
	if kept, _ := p.Progress(); len(kept) != 3 {
		t.Fatalf("the log kept %d events, want all 3", len(kept))
	}
}

// An event naming no invoke belongs to the only one in flight, and to
// none while several are.
func TestProgressOwner(t *testing.T) {
	p := &Process{invokes: map[string]*liveInvoke{"a": {id: "a"}}}
	if inv := p.progressOwner(json.RawMessage(`{"type":"progress"}`)); inv == nil || inv.id != "a" {
		t.Fatalf("one in flight: %v", inv)
	}
	p.invokes["b"] = &liveInvoke{id: "b"}
	if inv := p.progressOwner(json.RawMessage(`{"type":"progress"}`)); inv != nil {
		t.Fatalf("two in flight, none named: %v", inv.id)
	}
	for _, params := range []string{`{"invoke_id":"b"}`, `{"context":{"invoke_id":"b"}}`, `{"metadata":{"executa_invoke_id":"b"}}`} {
		if inv := p.progressOwner(json.RawMessage(params)); inv == nil || inv.id != "b" {
			t.Fatalf("%s: %v", params, inv)
		}
	}
	if inv := p.progressOwner(json.RawMessage(`{"context":{"invoke_id":"c"}}`)); inv != nil {
		t.Fatalf("an invoke not in flight: %v", inv.id)
	}
}

func TestProgressDiagnostic(t *testing.T) {
	long := "a" + strings.Repeat("é", MaxProgressText) // 2 bytes each: the clip falls inside one
	for _, tt := range []struct{ params, code, msg string }{
		{`{"type":"tool_update","data":"plain"}`, "tool_update", "plain"},
		{`{"type":"failed","data":{"message":"m","note":"n"}}`, "progress", "m"},
		{`{"data":{"text":"t"}}`, "progress", "t"},
		{`{"type":"progress","pct":5,"context":{"invoke_id":"x"}}`, "progress", `{"pct":5}`},
		{`{"type":"progress","data":{"note":"` + long + `"}}`, "progress", long[:MaxProgressText-1]},
		{`{"type":"progress","data":{"note":"password=hunter2"}}`, "progress", "password=" + redact.Mask},
		{`not json`, "progress", ""},
	} {
		d := ProgressEvent{Params: json.RawMessage(tt.params)}.Diagnostic(nil)
		if d.Code != tt.code || d.Message != tt.msg || !utf8.ValidString(d.Message) {
			t.Errorf("%s: %q %q", tt.params, d.Code, d.Message)
		}
	}
}
