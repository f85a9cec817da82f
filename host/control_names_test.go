package host

import (
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/host/executa"
)

// The control API routes by name, so an Executa plugin cannot take a
// name a provider or another Executa plugin has.
func TestAddExecutaRefusesTakenNames(t *testing.T) {
	h := NewHost()
	h.Add(&Plugin{inst: Installed{Name: "tickets"}})
	sup := executa.NewSupervisor(executa.PluginConfig{Name: "x", Command: "/bin/true"}, executa.Options{})
	if err := h.AddExecuta("tickets", sup); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("name of a provider: %v, want ErrNameTaken", err)
	}
	if err := h.AddExecuta("summaries", sup); err != nil {
		t.Fatal(err)
	}
	if err := h.AddExecuta("summaries", sup); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("name taken twice: %v, want ErrNameTaken", err)
	}
	if got := h.Names(); len(got) != 2 {
		t.Fatalf("names %v", got)
	}
}
