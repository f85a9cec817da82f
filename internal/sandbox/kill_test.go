//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

func init() {
	testModes["tree"] = pluginTree
	testModes["host"] = hostOfTree
}

// pluginTree is a plugin that leaves a process behind: a sleep in a
// session of its own, which no process group signal reaches.
func pluginTree() int {
	c := exec.Command("/bin/sleep", "1000")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

// hostOfTree is a host that starts pluginTree (the program in
// TREE_PLUGIN, its directory TREE_DIR) at TREE_LEVEL, prints its init's
// pid and waits to be killed.
func hostOfTree() int {
	dir := os.Getenv("TREE_DIR")
	priv, err := os.MkdirTemp(dir, "private-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	// In the test's directory, which the test removes: this host is
	// killed, so nothing of its own runs at its end.
	claims, err := os.MkdirTemp(dir, "claims-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	spec, err := claimTestUID(claims, Spec{Name: "tree", Path: os.Getenv("TREE_PLUGIN"), Env: []string{testModeEnv + "=tree"}, Dir: priv, InstallDir: dir},
		Level(os.Getenv("TREE_LEVEL")))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd, box, err := Command(spec, Level(os.Getenv("TREE_LEVEL")), nil)
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		err = box.Start(context.Background())
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("init", cmd.Process.Pid)
	select {}
}

// Kill ends a sandbox at each level, a process the plugin left in a
// session of its own included: at the namespaces level with SIGKILL to
// the init, which the kernel delivers there only from outside the
// plugin's namespace (the init ignores killSignal, which the plugin could
// send it too), elsewhere with killSignal, on which the init sweeps.
func TestKillEndsTheSandbox(t *testing.T) {
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			dir, bin := pluginBinary(t)
			priv, err := os.MkdirTemp(dir, "private-")
			if err != nil {
				t.Fatal(err)
			}
			cmd, box, err := Command(withUID(t, Spec{Name: "tree", Path: bin, Env: []string{testModeEnv + "=tree"}, Dir: priv, InstallDir: dir}, level), level, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := box.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
				t.Fatalf("the plugin said %q", line)
			}
			if got := namespaceInit(cmd.Process.Pid); got != (level == LevelNamespaces) {
				t.Errorf("namespaceInit = %v at the %s level", got, level)
			}
			sleeper := testenv.Descendant(t, cmd.Process.Pid, "sleep")
			Kill(cmd.Process.Pid)
			testenv.WaitGone(t, cmd.Process.Pid, "the init")
			_ = cmd.Wait()
			box.Wait()
			testenv.WaitGone(t, sleeper, "the plugin's detached process")
		})
	}
}

// A host that dies (SIGKILL: no clean-up of its own) takes its plugins'
// sandboxes with it at each level, through the init's death signal.
func TestSandboxDiesWithItsHost(t *testing.T) {
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			dir, bin := pluginBinary(t)
			host := exec.Command(bin, "-test.run=^$")
			host.Env = append(os.Environ(), testModeEnv+"=host", "TREE_DIR="+dir, "TREE_PLUGIN="+bin, "TREE_LEVEL="+string(level))
			host.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-host.Process.Pid, syscall.SIGKILL); _ = host.Wait() })
			line, _ := bufio.NewReader(out).ReadString('\n')
			initPid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "init "))
			if err != nil {
				t.Fatalf("the host said %q", line)
			}
			sleeper := testenv.Descendant(t, initPid, "sleep")
			if err := host.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = host.Wait()
			testenv.WaitGone(t, initPid, "the init")
			testenv.WaitGone(t, sleeper, "the plugin's detached process")
		})
	}
}
