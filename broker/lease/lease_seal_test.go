package lease

import (
	"os"
	"strings"
	"testing"
)

// The seal key opens every lease credential in a shared Redis (which
// other local users can often reach), so, like the secrets file and the
// signing keys, a key file others can read is refused.
func TestSealKeyFileMode(t *testing.T) {
	p := sealKeyFile(t)
	if _, err := newSealer(p); err != nil {
		t.Fatalf("a 0600 key file: %v", err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		_, err := newSealer(p)
		if err == nil || !strings.Contains(err.Error(), "broker.leases.seal_key_file") || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("mode %#o: got %v, want a refusal", mode, err)
		}
	}
}
