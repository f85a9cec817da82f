package pluginv1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/fsutil"
)

// Port install refusals besides the set's own (ErrPortSet).
var (
	ErrPortInstalled    = errors.New("the port is installed with another digest (replace it explicitly)")
	ErrPortNotInstalled = errors.New("no installed port of that name")
)

// LockedPort is one installed port: where its descriptor set is kept and
// the SHA-256 of the set's bytes, checked at every host start.
type LockedPort struct {
	File        string    `json:"file"`
	SHA256      string    `json:"sha256"`
	InstalledAt time.Time `json:"installed_at"`
}

// PortsDir is where installed descriptor sets are kept under a state
// directory.
func PortsDir(stateDir string) string { return filepath.Join(stateDir, "ports") }

// PortInstall is the result of InstallPort.
type PortInstall struct {
	Port     *PortFile
	Replaced bool // another digest of the port was installed before
	Same     bool // this digest was installed already: nothing changed
}

// InstallPort reviews set (ParsePortSet), keeps it as
// portsDir/<name>/<sha256>.binpb and pins its digest in the lockfile,
// then serves it in ports. A port installed with another digest is
// refused (ErrPortInstalled) unless replace; the same digest again
// changes nothing. A compiled port is never replaced: a set whose port
// file declares a compiled port's package is refused by the review.
func InstallPort(set []byte, replace bool, portsDir, lockPath string, ports *host.PortSet) (PortInstall, error) {
	pf, err := ParsePortSet(set, ports.Compiled)
	if err != nil {
		return PortInstall{}, err
	}
	res := PortInstall{Port: pf}
	dir := filepath.Join(portsDir, pf.Name)
	file := filepath.Join(dir, pf.SHA256+".binpb")
	lockfileMu.Lock()
	defer lockfileMu.Unlock()
	lf, err := ReadLockfile(lockPath)
	if err != nil {
		return PortInstall{}, err
	}
	if old, ok := lf.Ports[pf.Name]; ok {
		if old.SHA256 == pf.SHA256 {
			res.Same = true
		} else if !replace {
			return PortInstall{}, fmt.Errorf("port %s: %w", pf.Name, ErrPortInstalled)
		}
		res.Replaced = !res.Same
	}
	// Only the host reads a port's set (a plugin gets the host's answers,
	// never the file): owner-only, as the rest of the state directory.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return PortInstall{}, err
	}
	if err := fsutil.WriteFile(file, set, 0o600); err != nil {
		return PortInstall{}, err
	}
	lf.Ports[pf.Name] = LockedPort{File: file, SHA256: pf.SHA256, InstalledAt: time.Now().UTC()}
	if err := lf.Write(lockPath); err != nil {
		return PortInstall{}, err
	}
	removeOtherFiles(dir, file)
	if err := ports.Add(pf.File); err != nil {
		return PortInstall{}, fmt.Errorf("port %s: %w", pf.Name, err)
	}
	return res, nil
}

// RemovePort stops serving the installed port name, removes its lockfile
// entry and its stored set. A compiled port cannot be removed
// (host.ErrPortCompiled). A plugin whose manifest names the port is
// refused its calls to it at once, and fails its next launch.
func RemovePort(name, portsDir, lockPath string, ports *host.PortSet) error {
	if ports.Compiled(name) {
		return fmt.Errorf("port %s: %w", name, host.ErrPortCompiled)
	}
	lockfileMu.Lock()
	defer lockfileMu.Unlock()
	lf, err := ReadLockfile(lockPath)
	if err != nil {
		return err
	}
	if _, ok := lf.Ports[name]; !ok {
		return fmt.Errorf("port %s: %w", name, ErrPortNotInstalled)
	}
	delete(lf.Ports, name)
	if err := lf.Write(lockPath); err != nil {
		return err
	}
	if _, err := ports.Remove(name); err != nil {
		return err
	}
	if portName.MatchString(name) {
		_ = os.RemoveAll(filepath.Join(portsDir, name))
	}
	return nil
}

// LoadPort reads the installed port e pins, checks the set's digest and
// reviews it again; it serves nothing.
func LoadPort(name string, e LockedPort, compiled func(string) bool) (*PortFile, error) {
	b, err := os.ReadFile(e.File)
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", name, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != e.SHA256 {
		return nil, fmt.Errorf("port %s: %w (%s changed since install)", name, ErrPortDigestMismatch, e.File)
	}
	pf, err := ParsePortSet(b, compiled)
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", name, err)
	}
	if pf.Name != name {
		return nil, fmt.Errorf("port %s: %w (the set holds another port)", name, ErrPortDigestMismatch)
	}
	return pf, nil
}

// LoadPorts serves in ports every port the lockfile pins whose stored set
// still has its digest and passes review; each one refused is marked in
// ports (PortSet.Refused) and returned, and the others are served.
func LoadPorts(ports *host.PortSet, lockPath string) ([]error, error) {
	lf, err := ReadLockfile(lockPath)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(lf.Ports))
	for n := range lf.Ports {
		names = append(names, n)
	}
	slices.Sort(names)
	var refused []error
	for _, name := range names {
		pf, err := LoadPort(name, lf.Ports[name], ports.Compiled)
		if err == nil {
			err = ports.Add(pf.File)
		}
		if err != nil {
			ports.Refuse(name, err.Error())
			refused = append(refused, err)
		}
	}
	return refused, nil
}

// removeOtherFiles removes what dir holds besides keep: the sets of
// digests replaced.
func removeOtherFiles(dir, keep string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if p := filepath.Join(dir, de.Name()); p != keep {
			_ = os.RemoveAll(p)
		}
	}
}
