package launch

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// niceOf is the nice field of a /proc stat file (after the command
// name, which may hold anything).
func niceOf(t *testing.T, stat string) int {
	t.Helper()
	b, err := os.ReadFile(stat)
	if err != nil {
		t.Fatal(err)
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	n, err := strconv.Atoi(string(f[16]))
	if err != nil {
		t.Fatalf("%s: %v", stat, err)
	}
	return n
}

// The plugin runs at its CPU priority and its sandbox's init at the
// host's: the init watches the limits and sweeps, and a plugin busy on
// every core must not slow it to the plugin's own priority.
func TestPriorityIsThePluginsOnly(t *testing.T) {
	host := niceOf(t, "/proc/self/stat")
	for _, level := range levels(t) {
		t.Run(string(level), func(t *testing.T) {
			nice := host + 7
			p, err := Start(context.Background(), Request{Plugin: "attacker", Path: filepath.Join(attackerDir, "attacker"), Args: []string{"sleep"}},
				Options{Sandbox: sandbox.Config{Level: level, ReadOnly: []string{attackerDir}, Limits: sandbox.Limits{Nice: &nice}}})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			t.Cleanup(func() { p.Kill(); <-p.Exited() })
			plugin := strconv.Itoa(testenv.Descendant(t, p.Pid(), "attacker"))
			if got := niceOf(t, "/proc/"+plugin+"/stat"); got != nice {
				t.Errorf("the plugin's nice: %d, want %d", got, nice)
			}
			threads, _ := filepath.Glob("/proc/" + strconv.Itoa(p.Pid()) + "/task/*/stat")
			for _, th := range threads {
				if got := niceOf(t, th); got != host {
					t.Errorf("a thread of the init (%s) runs at nice %d, not the host's %d", th, got, host)
				}
			}
		})
	}
}
