package launch

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"
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
			go func() { _, _ = io.Copy(io.Discard, p.Stdout) }()
			t.Cleanup(func() { p.Kill(); <-p.Exited() })
			init := strconv.Itoa(p.Pid())
			plugin := ""
			for deadline := time.Now().Add(10 * time.Second); plugin == ""; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the plugin did not start")
				}
				tasks, _ := filepath.Glob("/proc/" + init + "/task/*/children")
				for _, f := range tasks {
					b, _ := os.ReadFile(f)
					for _, c := range bytes.Fields(b) {
						if comm, _ := os.ReadFile("/proc/" + string(c) + "/comm"); string(bytes.TrimSpace(comm)) == "attacker" {
							plugin = string(c)
						}
					}
				}
			}
			if got := niceOf(t, "/proc/"+plugin+"/stat"); got != nice {
				t.Errorf("the plugin's nice: %d, want %d", got, nice)
			}
			threads, _ := filepath.Glob("/proc/" + init + "/task/*/stat")
			for _, th := range threads {
				if got := niceOf(t, th); got != host {
					t.Errorf("a thread of the init (%s) runs at nice %d, not the host's %d", th, got, host)
				}
			}
		})
	}
}
