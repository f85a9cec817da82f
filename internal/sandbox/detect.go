//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
)

// Support is what this machine allows.
type Support struct {
	// Namespaces: an unprivileged process may create the user, mount,
	// pid, network, IPC and UTS namespaces a plugin gets.
	Namespaces bool
	// NamespacesErr says why not.
	NamespacesErr string
	// LandlockABI is the kernel's Landlock ABI (0: none); the landlock
	// level needs LandlockMinABI.
	LandlockABI int
}

// Best is the strongest level available.
func (s Support) Best() Level {
	switch {
	case s.Namespaces:
		return LevelNamespaces
	case s.LandlockABI >= LandlockMinABI:
		return LevelLandlock
	}
	return LevelOff
}

// Levels are the levels this machine allows, strongest first (off not
// included).
func (s Support) Levels() []Level {
	var out []Level
	if s.Namespaces {
		out = append(out, LevelNamespaces)
	}
	if s.LandlockABI >= LandlockMinABI {
		out = append(out, LevelLandlock)
	}
	return out
}

// String says it for check-config.
func (s Support) String() string {
	ns := "available"
	if !s.Namespaces {
		ns = "unavailable (" + s.NamespacesErr + ")"
	}
	ll := fmt.Sprintf("ABI %d", s.LandlockABI)
	if s.LandlockABI < LandlockMinABI {
		ll += fmt.Sprintf(" (the landlock level needs %d)", LandlockMinABI)
	}
	return fmt.Sprintf("namespaces %s; landlock %s; strongest level: %s", ns, ll, s.Best())
}

var (
	detectOnce sync.Once
	detected   Support
)

// Detect probes once what this machine allows: it starts the init in
// the plugin namespaces and asks it to exit at once.
func Detect() Support {
	detectOnce.Do(func() {
		detected.LandlockABI = LandlockABI()
		cmd := exec.Command("/proc/self/exe", initArg, "probe")
		cmd.Env = initEnv()
		cmd.SysProcAttr = probeAttrs()
		out, err := cmd.CombinedOutput()
		switch {
		case err == nil:
			detected.Namespaces = true
		case len(out) > 0:
			detected.NamespacesErr = string(trim(out))
		default:
			detected.NamespacesErr = err.Error()
		}
	})
	return detected
}

func trim(b []byte) []byte {
	if len(b) > 200 {
		b = b[:200]
	}
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// Resolve turns a configured level into the one a plugin gets: auto
// becomes the strongest available; a level asked for by name must be
// available.
func Resolve(l Level) (Level, error) {
	s := Detect()
	switch l {
	case "", LevelAuto:
		return s.Best(), nil
	case LevelOff:
		return LevelOff, nil
	case LevelNamespaces:
		if !s.Namespaces {
			return "", fmt.Errorf("%w: host.sandbox.level is namespaces, but %s: set it to auto or landlock", ErrUnavailable, s.NamespacesErr)
		}
	case LevelLandlock:
		if s.LandlockABI < LandlockMinABI {
			return "", fmt.Errorf("%w: host.sandbox.level is landlock, but the kernel's Landlock ABI is %d (needs %d)", ErrUnavailable, s.LandlockABI, LandlockMinABI)
		}
	default:
		return "", fmt.Errorf("%w: unknown level %q", ErrUnavailable, l)
	}
	return l, nil
}

// probeMain is the init's answer to Detect: it ran, so the namespaces
// could be made; mounting a tmpfs and a proc proves the rest.
func probeMain() int {
	if err := probeMounts(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
