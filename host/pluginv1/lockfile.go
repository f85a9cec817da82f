package pluginv1

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// HostVersions are the plugin/v1 app protocol versions this host speaks;
// install offers all of them, run time only the one locked at install.
var HostVersions = []uint32{1}

// Lockfile records what install reviewed: the binary's digest, the
// manifest's digest and the protocol version negotiated then; and the
// digest of each installed port's descriptor set.
type Lockfile struct {
	Version int                    `json:"version"`
	Plugins map[string]LockedEntry `json:"plugins"`
	Ports   map[string]LockedPort  `json:"ports,omitempty"`
}

// lockfileMu makes each read-change-write of a lockfile by this process
// (a plugin install, a port install or removal) whole.
var lockfileMu sync.Mutex

// LockedEntry is one installed plugin.
type LockedEntry struct {
	Dir             string    `json:"dir"`
	Binary          string    `json:"binary"`
	BinarySHA256    string    `json:"binary_sha256"`
	ManifestSHA256  string    `json:"manifest_sha256"`
	ProtocolVersion uint32    `json:"protocol_version"`
	InstalledAt     time.Time `json:"installed_at"`
}

var pluginName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ReadLockfile reads a lockfile; a missing one is empty. One its group
// or others may write is refused: they could pin a binary of their own.
func ReadLockfile(path string) (*Lockfile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Lockfile{Version: 1, Plugins: map[string]LockedEntry{}, Ports: map[string]LockedPort{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil {
		err = fsutil.CheckOwnFile(path, st)
	}
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	lf := &Lockfile{}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(lf); err != nil || lf.Version != 1 {
		return nil, fmt.Errorf("lockfile %s is not a version 1 lockfile", path)
	}
	if lf.Plugins == nil {
		lf.Plugins = map[string]LockedEntry{}
	}
	if lf.Ports == nil {
		lf.Ports = map[string]LockedPort{}
	}
	return lf, nil
}

// Write stores the lockfile atomically, mode 0600.
func (lf *Lockfile) Write(path string) error {
	b, err := json.MarshalIndent(lf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFile(path, append(b, '\n'), 0o600)
}

// Load returns the installed plugin, checking that its manifest still has
// the digest install recorded.
func (e LockedEntry) Load(name string) (Installed, error) {
	m, err := LoadManifest(filepath.Join(e.Dir, "manifest.yaml"))
	if err != nil {
		return Installed{}, err
	}
	d, err := ManifestDigest(m)
	if err != nil {
		return Installed{}, err
	}
	if d != e.ManifestSHA256 {
		return Installed{}, fmt.Errorf("plugin %s: %w (manifest.yaml changed since install)", name, ErrManifestMismatch)
	}
	return Installed{Name: name, Binary: e.Binary, BinarySHA256: e.BinarySHA256, Manifest: m, ProtocolVersion: e.ProtocolVersion}, nil
}

func versionsEnv(vs []uint32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(s, ",")
}

// updateLockfile reads the lockfile, applies change and writes it back,
// with no other change of this process in between.
func updateLockfile(path string, change func(*Lockfile)) error {
	lockfileMu.Lock()
	defer lockfileMu.Unlock()
	lf, err := ReadLockfile(path)
	if err != nil {
		return err
	}
	change(lf)
	return lf.Write(path)
}
