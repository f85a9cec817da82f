package launch

import (
	"bufio"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// A plugin that writes many files, each far below any per-file bound,
// is killed whole at its disk limit, which bounds its private directory,
// /tmp and /dev/shm together — files kept or deleted and held open.
func TestEscapeDisk(t *testing.T) {
	for _, level := range levels(t) {
		dirs := "TMPDIR"
		if level == sandbox.LevelNamespaces {
			dirs = "TMPDIR,/tmp,/dev/shm"
		}
		for _, mode := range []string{"diskfill", "diskunlinked"} {
			t.Run(string(level)+"/"+mode, func(t *testing.T) {
				cfg := sandbox.Config{Level: level, ReadOnly: []string{attackerDir},
					Limits: sandbox.Limits{DiskMB: 64, MemoryMB: 256}}
				p, err := Start(context.Background(), Request{Plugin: "attacker", Path: filepath.Join(attackerDir, "attacker"),
					Args: []string{mode}, Env: []string{"ATTACK_DISK=" + dirs, "ATTACK_DISK_MB=256"}}, Options{Sandbox: cfg})
				if err != nil {
					t.Fatal(err)
				}
				out := bufio.NewScanner(p.Stdout())
				var lines []string
				for out.Scan() {
					lines = append(lines, out.Text())
				}
				<-p.Exited()
				if err := p.Err(); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "(disk)") {
					t.Fatalf("exit: %v, want the disk limit (the plugin said %q)", err, lines)
				}
			})
		}
	}
}
