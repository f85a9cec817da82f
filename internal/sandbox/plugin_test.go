//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// A sandboxed test plugin: the test binary itself, copied where the
// plugin's uid may execute it, run in the part testModes names.

// pluginRun is how a sandboxed test plugin ended.
type pluginRun struct {
	stdout, stderr string
	code           int // the init's exit status: the plugin's
	exit           Exit
}

// pluginBinary copies the test binary into a directory of its own,
// readable by everyone (a root host runs plugins as uid 65534), and
// returns the directory and the copy.
func pluginBinary(t testing.TB) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "airlock-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "plugin")
	if err := fsutil.CopyFile(self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// runPlugin runs the test binary as a plugin in mode at level, with env
// added to its environment, and waits for its end.
func runPlugin(t *testing.T, level Level, mode string, env ...string) pluginRun {
	t.Helper()
	return runPluginLog(t, level, mode, nil, env...)
}

// runPluginLog is runPlugin with the box logging to log.
func runPluginLog(t *testing.T, level Level, mode string, log *slog.Logger, env ...string) pluginRun {
	t.Helper()
	dir, bin := pluginBinary(t)
	priv := filepath.Join(dir, "private")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := withUID(t, Spec{Name: "test", Path: bin, Env: append([]string{testModeEnv + "=" + mode}, env...), Dir: priv, InstallDir: dir}, level)
	cmd, box, err := Command(spec, level, log)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := box.Start(context.Background()); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	err = cmd.Wait()
	run := pluginRun{exit: box.Wait()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		run.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	run.stdout, run.stderr = stdout.String(), stderr.String()
	return run
}

// unprivilegedRuns are the tests TestAsAnUnprivilegedHost runs again.
var unprivilegedRuns = []string{"TestInitSurvivesItsPluginsSignals", "TestKillEndsTheSandbox", "TestSandboxDiesWithItsHost",
	"TestProcShowsNothingOfTheMachine"}

// The plugin tests again with the host as an unprivileged user (setpriv
// to 65534), whose plugins share its uid: only the sandbox stands
// between a plugin and its init, and the other processes of that uid.
func TestAsAnUnprivilegedHost(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("this run is already unprivileged: it is the inner run")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is required (util-linux)")
	}
	dir, bin := pluginBinary(t)
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		bin, "-test.run=^("+strings.Join(unprivilegedRuns, "|")+")$", "-test.v", "-test.count=1")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test failed as an unprivileged user: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "uid ") {
			t.Log(strings.TrimSpace(line))
		}
	}
	for _, level := range Detect().Levels() {
		for _, test := range unprivilegedRuns {
			if want := "--- PASS: " + test + "/" + string(level); !strings.Contains(string(out), want) {
				t.Errorf("the unprivileged run lacks %q:\n%s", want, out)
			}
		}
	}
}
