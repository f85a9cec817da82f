package host

import (
	"errors"
	"strings"
	"testing"
)

// A host with no policy denies every call, and says which setting to
// set: a plugin author's first call meets this.
func TestNoPolicyDenialNamesTheSetting(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *Options) { o.Policy = nil })
	if err := h.AddProvider(f.inst); err != nil {
		t.Fatal(err)
	}
	_, err := invokeList(h, f.inst.Name)
	if !errors.Is(err, ErrPolicyDenied) || !errors.Is(err, ErrNoPolicy) || !strings.Contains(err.Error(), "host.policy") {
		t.Fatalf("err = %v, want a denial naming host.policy", err)
	}
}
