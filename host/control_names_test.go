package host

import (
	"context"
	"errors"
	"testing"
)

func TestAddRefusesTakenNames(t *testing.T) {
	h := New(Options{})
	defer h.Shutdown(context.Background())
	boom := errors.New("cannot start")
	fail := func(context.Context) (Runtime, error) { return nil, boom }
	if err := h.Add("tickets", KindPluginV1, fail); !errors.Is(err, boom) {
		t.Fatalf("first launch: %v", err)
	}
	if err := h.Add("tickets", KindExecuta, fail); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("taken name: %v", err)
	}
	if _, err := h.Invoke(context.Background(), "tickets", InvokeRequest{}); !errors.Is(err, ErrPluginRestarting) {
		t.Fatalf("call to a plugin waiting for its restart: %v", err)
	}
	if _, err := h.Invoke(context.Background(), "nope", InvokeRequest{}); !errors.Is(err, ErrPluginUnknown) {
		t.Fatalf("unknown plugin: %v", err)
	}
}
