package sampling

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFixture(t *testing.T, lines string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fixture.jsonl")
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The first entry whose match is in the last user message answers; an
// entry without token counts reports no usage.
func TestFixture(t *testing.T) {
	fb, err := LoadFixture(writeFixture(t, `{"match":"weather","text":"sunny","model":"wx","inputTokens":3,"outputTokens":1}`+"\n\n"+
		`{"match":"","text":"default"}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := fb.Complete(context.Background(), request("the weather?"))
	if err != nil || c.Text != "sunny" || c.Model != "wx" || !c.UsageReported || c.Provider != "fixture" {
		t.Fatalf("match: %+v %v", c, err)
	}
	c, err = fb.Complete(context.Background(), request("anything"))
	if err != nil || c.Text != "default" || c.Model != "fixture" || c.UsageReported {
		t.Fatalf("default: %+v %v", c, err)
	}
	if fb.SupportsFormat("json_object") {
		t.Fatal("a fixture without json entries supports structured output")
	}
	strict, err := LoadFixture(writeFixture(t, `{"match":"only","text":"{}","json":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strict.SupportsFormat("json_object") {
		t.Fatal("a json entry does not support structured output")
	}
	if _, err := strict.Complete(context.Background(), request("other")); err == nil {
		t.Fatal("no entry matches, yet an answer")
	}
}

// A line that is not JSON is named by its number, not quoted.
func TestFixtureBadLine(t *testing.T) {
	_, err := LoadFixture(writeFixture(t, `{"text":"ok"}`+"\n"+`secret-looking line`+"\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "secret-looking") {
		t.Fatalf("bad line: %v", err)
	}
}
