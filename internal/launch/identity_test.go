package launch

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// identity is who a plugin runs as, from its /proc/self/status.
type identity struct {
	uids, gids []int // real, effective, saved, filesystem
	groups     []string
}

// identityOf starts plugin name with cfg and reads who it runs as.
func identityOf(t *testing.T, cfg sandbox.Config, name string) (identity, Runner) {
	t.Helper()
	p, err := Start(context.Background(), Request{Plugin: name, Path: filepath.Join(attackerDir, "attacker"), Args: []string{"identity"}},
		Options{Sandbox: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var id identity
	sc := bufio.NewScanner(p.Stdout())
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		f := strings.Fields(v)
		switch k {
		case "Uid":
			id.uids = atois(t, f)
		case "Gid":
			id.gids = atois(t, f)
		case "Groups":
			id.groups = f
		}
	}
	<-p.Exited()
	if err := p.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(id.uids) != 4 || len(id.gids) != 4 {
		t.Fatalf("%s: no Uid and Gid lines: %+v", name, id)
	}
	return id, p
}

func atois(t *testing.T, f []string) []int {
	var out []int
	for _, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		out = append(out, n)
	}
	return out
}

// same reports whether every id is want.
func same(ids []int, want int) bool {
	for _, id := range ids {
		if id != want {
			return false
		}
	}
	return true
}

// A root host runs each plugin as a uid and gid of its own, from the
// configured range, with no supplementary group, at every level: two
// plugins are two users to the kernel. An unprivileged host runs them as
// itself (it may map no other uid), with the groups it has.
func TestEachPluginItsOwnIdentity(t *testing.T) {
	claims := t.TempDir()
	r := sandbox.UIDRange{First: 700400, Count: 64}
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			cfg := sandbox.Config{Level: level, ReadOnly: []string{attackerDir}, UIDRange: r, ClaimsDir: claims, Owner: "identity-test"}
			alpha, pa := identityOf(t, cfg, "alpha")
			beta, pb := identityOf(t, cfg, "beta")
			if os.Geteuid() != 0 {
				for _, id := range []identity{alpha, beta} {
					if !same(id.uids, os.Getuid()) || len(id.groups) != len(mustGroups(t)) {
						t.Errorf("an unprivileged host's plugin: %+v, want uid %d and %d groups", id, os.Getuid(), len(mustGroups(t)))
					}
				}
				if pa.UID() != 0 || pb.UID() != 0 {
					t.Errorf("Runner.UID %d, %d: want 0 (the host's own)", pa.UID(), pb.UID())
				}
				return
			}
			for _, c := range []struct {
				id identity
				p  Runner
			}{{alpha, pa}, {beta, pb}} {
				u := c.p.UID()
				if !r.Contains(u) || !same(c.id.uids, u) || !same(c.id.gids, u) {
					t.Errorf("the plugin runs as uids %v gids %v; Runner.UID %d: want one uid and gid of %+v", c.id.uids, c.id.gids, u, r)
				}
				if len(c.id.groups) != 0 {
					t.Errorf("the plugin has supplementary groups %v: want none", c.id.groups)
				}
			}
			if pa.UID() == pb.UID() {
				t.Errorf("alpha and beta both run as uid %d", pa.UID())
			}
			// The same plugin started again (a restart by its
			// supervisor) is the same user.
			if again, _ := identityOf(t, cfg, "alpha"); again.uids[0] != pa.UID() {
				t.Errorf("alpha again: uid %d, was %d", again.uids[0], pa.UID())
			}
		})
	}
}

func mustGroups(t *testing.T) []int {
	g, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	return g
}
