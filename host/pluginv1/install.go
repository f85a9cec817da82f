package pluginv1

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/fsutil"
)

// ErrNotInstalled: the lockfile has no plugin of that name.
var ErrNotInstalled = errors.New("plugin is not in the lockfile")

// stagePrefix names a package being installed: it becomes a version
// directory only once it passed every check, so a directory of this name
// is always left over from an install that failed or was cut short.
const stagePrefix = ".stage-"

// Install reviews the package in src (the provider binary named
// "provider", and manifest.yaml) and installs it as a new version of its
// plugin:
//
//  1. stage: copy it into a new directory under pluginsDir/<name>;
//  2. verify: launch it from there once, offering every host version, so
//     the handshake, manifest and port file checks run now;
//  3. swap: rename the staged directory to a version directory and
//     replace the lockfile (atomically, by rename) to point at it; only
//     then are the older versions removed.
//
// A package that fails any step changes nothing that is installed: the
// plugin's files and lockfile entry stay as they were, so a running
// plugin keeps running and restarts from its own version.
func Install(ctx context.Context, src, pluginsDir, lockPath string, opts host.Options) (LockedEntry, string, error) {
	m, err := LoadManifest(filepath.Join(src, "manifest.yaml"))
	if err != nil {
		return LockedEntry{}, "", err
	}
	name := m.GetName()
	if !pluginName.MatchString(name) {
		return LockedEntry{}, "", errors.New("manifest name: lower-case letters, digits, _ . - (at most 64)")
	}
	// A package is no secret, and a root host runs the plugin as an
	// unprivileged uid that must read it: the package is world-readable,
	// the plugins directory only traversable (0711: no listing).
	base := filepath.Join(pluginsDir, name)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return LockedEntry{}, "", err
	}
	if err := os.Chmod(base, 0o755); err != nil { // whatever the umask
		return LockedEntry{}, "", err
	}
	if err := os.Chmod(pluginsDir, 0o711); err != nil {
		return LockedEntry{}, "", err
	}
	stage, err := os.MkdirTemp(base, stagePrefix)
	if err != nil {
		return LockedEntry{}, "", err
	}
	dir := stage
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Chmod(stage, 0o755); err != nil {
		return LockedEntry{}, "", err
	}
	bin := filepath.Join(stage, "provider")
	if err := fsutil.CopyFile(filepath.Join(src, "provider"), bin, 0o755); err != nil {
		return LockedEntry{}, "", fmt.Errorf("copy provider binary: %w", err)
	}
	if err := fsutil.CopyFile(filepath.Join(src, "manifest.yaml"), filepath.Join(stage, "manifest.yaml"), 0o644); err != nil {
		return LockedEntry{}, "", err
	}
	digest, err := BinaryDigest(bin)
	if err != nil {
		return LockedEntry{}, "", err
	}
	md, err := ManifestDigest(m)
	if err != nil {
		return LockedEntry{}, "", err
	}
	opts.Policy = nil // nothing is invoked during install
	p, err := startProvider(ctx, Installed{Name: name, Binary: bin, BinarySHA256: digest, Manifest: m}, opts, HostVersions)
	if err != nil {
		return LockedEntry{}, "", fmt.Errorf("install %s: %w", name, err)
	}
	version := p.version
	_ = p.Shutdown(ctx)

	// The verified package becomes a version directory; the lockfile's
	// replacement is the one moment it takes the old version's place.
	dir = filepath.Join(base, "v-"+strings.TrimPrefix(filepath.Base(stage), stagePrefix))
	if err := os.Rename(stage, dir); err != nil {
		dir = stage
		return LockedEntry{}, "", fmt.Errorf("install %s: %w", name, err)
	}
	e := LockedEntry{Dir: dir, Binary: filepath.Join(dir, "provider"), BinarySHA256: digest, ManifestSHA256: md,
		ProtocolVersion: version, InstalledAt: time.Now().UTC()}
	if err := updateLockfile(lockPath, func(lf *Lockfile) { lf.Plugins[name] = e }); err != nil {
		return LockedEntry{}, "", err
	}
	committed = true
	removeOtherVersions(base, dir, opts)
	return e, name, nil
}

// removeOtherVersions removes what base holds besides the installed
// version: older versions (a process still running an old binary keeps
// it), stages left over, and the files of the single-directory layout of
// earlier releases.
func removeOtherVersions(base, keep string, opts host.Options) {
	des, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, de := range des {
		if p := filepath.Join(base, de.Name()); p != keep {
			if err := os.RemoveAll(p); err != nil && opts.Log != nil {
				opts.Log.Warn("an older plugin version could not be removed", "dir", p, "err", err)
			}
		}
	}
}

// AddInstalled registers with h the plugin/v1 provider the lockfile
// records as name, and launches it under h's supervisor (see
// host.Host.Add). Each launch reads the lockfile anew: a reinstall takes
// effect at the plugin's next launch, and an install that failed changed
// nothing it reads.
func AddInstalled(h *host.Host, name, lockPath string) error {
	return h.Add(name, host.KindPluginV1, func(ctx context.Context) (host.Runtime, error) {
		lf, err := ReadLockfile(lockPath)
		if err != nil {
			return nil, err
		}
		e, ok := lf.Plugins[name]
		if !ok {
			return nil, fmt.Errorf("%w: %w: %s", host.ErrManifestInvalid, ErrNotInstalled, name)
		}
		inst, err := e.Load(name)
		if err != nil {
			// A manifest that no longer loads is a failure a restart
			// cannot fix.
			return nil, fmt.Errorf("%w: %w", host.ErrManifestInvalid, err)
		}
		return launchRuntime(ctx, inst, h.Options())
	})
}
