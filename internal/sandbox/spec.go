//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
)

// Spec is one plugin process to start in a sandbox.
type Spec struct {
	// Name is the plugin's name (errors and the sandbox's host name).
	Name string
	// Level is the level asked for (LevelAuto: the strongest available).
	Level Level
	// Path is the program (absolute), Args its arguments after argv[0],
	// Env its whole environment.
	Path string
	Args []string
	Env  []string
	// Dir is the plugin's private directory: read-write, its working
	// directory and TMPDIR, removed by its owner after the exit.
	Dir string
	// InstallDir is the plugin's install directory, read-only ("" none).
	InstallDir string
	// ReadOnly are the operator's extra read-only grants.
	ReadOnly []string
	// Sockets are host directories holding unix sockets the plugin
	// connects to (plugin/v1's HostService), shown read-only.
	Sockets []string
	// Hide are paths the plugin never sees even where a read-only grant
	// covers them: Airlock's state directory, config and runtime
	// directories.
	Hide []string
	// Relays are the only TCP endpoints the plugin may reach.
	Relays []Relay
	// Limits bound the plugin (zero fields: defaults).
	Limits Limits
	// UID is the uid, and gid, the plugin runs as when the host runs as
	// root: its own, from Config.PluginUID. A root host starts no
	// sandboxed plugin without one (never as root, nor as a uid shared
	// with another plugin); an unprivileged host's plugins run as its
	// own uid and UID is ignored.
	UID int
}

// Relay is a TCP endpoint the plugin may reach: the egress proxy, the
// Executa files endpoint. Target is host:port as the host dials it.
type Relay struct {
	Target string
	// Serve, when set, takes the sandbox's listener over at the
	// namespaces level — the egress proxy serves it directly, with no
	// relay hop — until the returned Closer is closed (and at the
	// landlock level, Own). On success the listener is Serve's; on
	// failure the plugin does not start: a relayed connection would reach
	// the shared proxy port, where the proxy cannot tell whose it is.
	Serve func(net.Listener) (io.Closer, error)
	// Own is, at the landlock level, a listener of this plugin's own
	// that Listen bound on the host for a relay with Serve: the proxy
	// serves it knowing whose connections they are, and the plugin's
	// Landlock rules allow connecting to its port only, not to the
	// shared proxy port every plugin would otherwise share.
	Own net.Listener
}

// PluginAddr is the address the plugin dials for r at level: at the
// namespaces level a listener on the sandbox's own loopback with the
// target's port (the host relays it), at the landlock level the
// plugin's own listener where it has one, elsewhere the target itself.
func (r Relay) PluginAddr(level Level) string {
	if level != LevelNamespaces {
		if r.Own != nil && level == LevelLandlock {
			return r.Own.Addr().String()
		}
		return r.Target
	}
	_, port, err := net.SplitHostPort(r.Target)
	if err != nil {
		return r.Target
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// port is the TCP port the plugin connects to for r at level.
func (r Relay) port(level Level) int {
	_, p, _ := net.SplitHostPort(r.PluginAddr(level))
	n, _ := strconv.Atoi(p)
	return n
}

// Listen gives each relay with Serve a listener of its plugin's own at
// the landlock level (bound on the host, at the target's address with a
// port of its own), so that the proxy knows which plugin a connection
// comes from; at other levels it returns relays as they are. On success
// the listeners are the box's once Command succeeds; until then, and
// on error, CloseOwn closes them.
func Listen(level Level, relays []Relay) ([]Relay, error) {
	if level != LevelLandlock {
		return relays, nil
	}
	out := slices.Clone(relays)
	for i, r := range out {
		if r.Serve == nil {
			continue
		}
		host, _, err := net.SplitHostPort(r.Target)
		if err != nil {
			CloseOwn(out)
			return nil, fmt.Errorf("%w: relay target: %w", ErrSetup, err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			CloseOwn(out)
			return nil, fmt.Errorf("%w: the plugin's own proxy listener: %w", ErrSetup, err)
		}
		out[i].Own = l
	}
	return out, nil
}

// CloseOwn closes the listeners Listen bound.
func CloseOwn(relays []Relay) {
	for _, r := range relays {
		if r.Own != nil {
			r.Own.Close()
		}
	}
}

// systemDirs are what every interpreter needs, shown read-only where they
// exist (as symbolic links where the host has them as links, for merged
// /usr).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// devices are bound into the sandbox's /dev.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// initSpec is what the host hands the init (JSON on fd 3).
type initSpec struct {
	Level  Level    `json:"level"`
	Name   string   `json:"name"`
	Path   string   `json:"path"`
	Args   []string `json:"args"`
	Env    []string `json:"env"`
	Dir    string   `json:"dir"`
	Mounts []mount  `json:"mounts"`
	Hide   []string `json:"hide"`
	// Listen are loopback addresses the init binds inside the network
	// namespace and hands back to the host (namespaces level).
	Listen []string `json:"listen"`
	// Ports are the TCP ports the plugin may connect to (landlock).
	Ports  []int  `json:"ports"`
	Limits Limits `json:"limits"`
	// UID is the plugin's own uid and gid (a root host), 0 none.
	UID int `json:"uid,omitempty"`
}

// mount is one bind of a host path at the same path inside.
type mount struct {
	Dst  string `json:"dst"`
	RW   bool   `json:"rw"`
	Link string `json:"link,omitempty"` // a symbolic link to create instead
}

// Exit is how a sandboxed plugin ended, as its init saw it.
type Exit struct {
	// Limit names the limit the plugin reached when the init killed it
	// for that ("memory", "processes"); "" otherwise.
	Limit string `json:"limit,omitempty"`
	// Detail says more (the limit's value, the peak seen).
	Detail string `json:"detail,omitempty"`
	// Refused are the calls the seccomp filter refused the plugin, by
	// kind, where the kernel lets the init count them.
	Refused []Refusal `json:"refused,omitempty"`
}

// initMessage is a message of the init's after its setup report: a
// notice of a refusal as it happens, or the Exit that ends them.
type initMessage struct {
	Exit
	Refusal *Refusal `json:"refusal,omitempty"`
}

// setupReport is the init's first message: "" when the sandbox is up.
type setupReport struct {
	Err string `json:"err,omitempty"`
}
