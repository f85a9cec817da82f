package pluginv1

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
)

// A host with no policy denies every call, and says which setting to
// set: a plugin author's first call meets this.
func TestNoPolicyDenialNamesTheSetting(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *host.Options) { o.Policy = nil })
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	_, err := invokeList(h, f.inst.Name)
	if !errors.Is(err, host.ErrPolicyDenied) || !errors.Is(err, host.ErrNoPolicy) || !strings.Contains(err.Error(), "host.policy") {
		t.Fatalf("err = %v, want a denial naming host.policy", err)
	}
}
