package launch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// A hidden path written through a symbolic link stays hidden under a
// grant of the real directory, at every level: the comparison is made on
// the resolved paths too (state_dir under /var/run, a grant of /run).
func TestHiddenThroughASymlink(t *testing.T) {
	root, err := os.MkdirTemp("", "airlock-hide-link-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	_ = os.Chmod(root, 0o755)
	real := filepath.Join(root, "real")
	secret := filepath.Join(real, "state", "broker-token")
	if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("airlock-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	argv := attackers(t)["go"]
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			p, err := Start(context.Background(), Request{Plugin: "attacker", Path: argv[0], Args: []string{"probe"},
				Env: []string{"ATTACK_READ=" + secret}},
				Options{Sandbox: sandbox.Config{Level: level, ReadOnly: []string{real, attackerDir}},
					Hide: []string{filepath.Join(link, "state")}})
			if err != nil {
				t.Fatal(err)
			}
			got := attempts(p)
			at, ok := got["read "+secret]
			if !ok {
				t.Fatalf("the read was not attempted: %v", got)
			}
			if at.Escaped {
				t.Fatalf("ESCAPED: the plugin read a path hidden through a symbolic link (%s)", at.Detail)
			}
		})
	}
}
