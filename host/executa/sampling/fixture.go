package sampling

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Fixture answers from a JSONL file of canned responses, for dev and
// tests: each line {"match": "...", "text": "...", "model": "..."}; the
// first whose match is in the last user message (or empty) answers. An
// entry with neither inputTokens nor outputTokens stands for a backend
// that reports no usage.
type Fixture struct {
	entries []fixtureEntry
}

type fixtureEntry struct {
	Match        string `json:"match"`
	Text         string `json:"text"`
	Model        string `json:"model"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
	JSON         bool   `json:"json"`
}

// LoadFixture reads a JSONL fixture file.
func LoadFixture(path string) (*Fixture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fb := &Fixture{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e fixtureEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("sampling fixture %s line %d: not a JSON object", path, n)
		}
		fb.entries = append(fb.entries, e)
	}
	return fb, sc.Err()
}

// Complete implements Backend.
func (fb *Fixture) Complete(_ context.Context, req *Request) (Completion, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m.Content.Text
		}
	}
	for _, e := range fb.entries {
		if e.Match == "" || strings.Contains(last, e.Match) {
			model := e.Model
			if model == "" {
				model = "fixture"
			}
			return Completion{Text: e.Text, Model: model, StopReason: "endTurn", InputTokens: e.InputTokens,
				OutputTokens: e.OutputTokens, Provider: "fixture", Structured: e.JSON,
				UsageReported: e.InputTokens > 0 || e.OutputTokens > 0}, nil
		}
	}
	return Completion{}, errors.New("no fixture matches")
}

// SupportsFormat implements Backend: fixtures marked json can answer
// structured requests.
func (fb *Fixture) SupportsFormat(string) bool {
	for _, e := range fb.entries {
		if e.JSON {
			return true
		}
	}
	return false
}
