package pluginv1

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/strictjson"
)

// Tool arguments that repeat a key, or hold two keys differing only in
// case, are refused before the plugin sees them: the plugin and the
// host's records would read them differently.
func TestExecutaArgumentsDuplicateKeys(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	if err := executa.Add(h, pyPlugin(t, "py"), executa.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"a":1,"a":2}`, `{"a":1,"A":3}`, `{"x":{"id":1,"ID":2}}`} {
		_, err := h.Invoke(context.Background(), "py", host.InvokeRequest{Method: "context", JSON: json.RawMessage(args),
			Deadline: time.Now().Add(20 * time.Second)})
		if !errors.Is(err, host.ErrBadInput) || !errors.Is(err, strictjson.ErrDuplicateKey) {
			t.Errorf("arguments %s: %v", args, err)
		}
	}
}
