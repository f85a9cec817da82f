package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// The tracing block is off by default, decoded strictly, and validated
// with the rest.
func TestTracingBlock(t *testing.T) {
	if Default().Tracing.Enabled() {
		t.Error("tracing on by default")
	}
	c, err := Load(filepath.Join("testdata", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tracing.Enabled() || *c.Tracing.SampleRatio != 0.01 || c.Tracing.QueueSize != 4096 {
		t.Errorf("tracing decoded as %+v", c.Tracing)
	}
	if _, err := Parse([]byte("version: v1\ntracing:\n  endpoint: http://127.0.0.1:4318\n  headers: {a: b}\n")); err == nil ||
		!strings.Contains(err.Error(), "line 4: field headers not found") {
		t.Errorf("an unknown tracing key: %v", err)
	}
	c, err = Parse([]byte("version: v1\ntracing:\n  endpoint: collector:4318\n  sample_ratio: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{"tracing.endpoint:", "tracing.sample_ratio:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}
