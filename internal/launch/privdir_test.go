package launch

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const sessionChildEnv = "AIRLOCK_TEST_SESSION_TMP"

// sessionChild plays a host: it starts a session under tmp, makes a
// private directory holding a file, prints the directory and waits for
// its stdin to close (or to be killed).
func sessionChild(tmp string) {
	dir, err := newSession(tmp)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	priv, err := os.MkdirTemp(dir, "airlock-plugin-")
	if err == nil {
		err = os.WriteFile(filepath.Join(priv, "left-behind"), []byte("x"), 0o600)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(priv)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// startHost starts a sessionChild and returns it with its private directory.
func startHost(t *testing.T, tmp string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sessionChildEnv+"="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(line, tmp) {
		t.Fatalf("host child: %q %v", line, err)
	}
	return cmd, line
}

// A host killed outright leaves its plugins' private directories behind;
// the next host to start removes them, and never a live host's.
func TestPrivateDirsOfADeadHost(t *testing.T) {
	tmp := t.TempDir()
	dead, deadDir := startHost(t, tmp)
	_, liveDir := startHost(t, tmp)
	if err := dead.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.Wait()
	if _, err := os.Stat(deadDir); err != nil {
		t.Fatalf("the killed host's directory should still be there before a sweep: %v", err)
	}

	mine, err := newSession(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(deadDir)); !os.IsNotExist(err) {
		t.Errorf("the dead host's session was not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(liveDir, "left-behind")); err != nil {
		t.Errorf("a live host's private directory was removed: %v", err)
	}
	// This process's own session is held too: a second start keeps it.
	if _, err := newSession(tmp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("this process's own session was swept: %v", err)
	}
	if fi, err := os.Stat(mine); err == nil && fi.Mode().Perm() != 0o711 {
		t.Errorf("session mode %v, want 0711", fi.Mode().Perm())
	}
}

// A base another user planted, or one others may write to, is not used.
func TestPrivateDirsRefuseAForeignBase(t *testing.T) {
	tmp := t.TempDir()
	base := worldWritableBase(t, tmp)
	if _, err := newSession(tmp); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("a world-writable base was used: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(base, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(base, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := newSession(tmp); err == nil || !strings.Contains(err.Error(), "another user") {
			t.Fatalf("another user's base was used: %v", err)
		}
	}
	if err := os.Remove(base); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(tmp, "elsewhere")
	if err := os.Mkdir(other, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, base); err != nil {
		t.Fatal(err)
	}
	if _, err := newSession(tmp); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a symlinked base was used: %v", err)
	}
}

// The base and the session are 0711 whatever the umask (a unit's
// UMask=0077): plugins a root host runs as their own uid traverse both.
func TestPrivateDirsTraversableWhateverTheUmask(t *testing.T) {
	tmp := t.TempDir()
	old := syscall.Umask(0o077)
	_, err := newSession(tmp)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tmp, fmt.Sprintf("airlock-%d", os.Geteuid()))
	if fi, err := os.Stat(base); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("base %v %v, want 0711", fi.Mode().Perm(), err)
	}
}

// A base another user made first is not used, and the host says so once
// (with why), not silently.
func TestPrivateDirsWarnOnceWithoutASession(t *testing.T) {
	tmp := t.TempDir()
	worldWritableBase(t, tmp)
	savedErr := sessionErr
	t.Cleanup(func() { sessionErr, sessionWarn = savedErr, sync.Once{} })
	_, sessionErr = newSession(tmp)
	sessionWarn = sync.Once{}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	warnNoSession(log)
	warnNoSession(log)
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 || !strings.Contains(buf.String(), "writable by others") {
		t.Fatalf("%d warnings: %s", n, buf.String())
	}
}

// worldWritableBase makes this user's base in tmp as another user could
// have: 0777.
func worldWritableBase(t *testing.T, tmp string) string {
	t.Helper()
	base := filepath.Join(tmp, fmt.Sprintf("airlock-%d", os.Geteuid()))
	if err := os.Mkdir(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	return base
}
