package pluginv1

import (
	"context"
	"errors"
	"sync"

	"github.com/airlock-dev/airlock/host"
)

// InstallResult answers the control API's POST /v1/plugins.
type InstallResult struct {
	Name            string     `json:"name"`
	ProtocolVersion uint32     `json:"protocol_version"`
	BinarySHA256    string     `json:"binary_sha256"`
	ManifestSHA256  string     `json:"manifest_sha256"`
	State           host.State `json:"state"`
	LastFailure     string     `json:"last_failure,omitempty"`
}

// Installer installs plugin/v1 packages into PluginsDir and Lockfile
// while Host runs, and launches each under Host's supervisor: the control
// API's install (control.Handler.EnableInstall). One install runs at a
// time, since each reads, changes and writes the lockfile.
type Installer struct {
	Host                 *host.Host
	PluginsDir, Lockfile string

	mu sync.Mutex
}

// Install reviews and installs the package in dir (see Install) and
// launches it; its result is an InstallResult. A reinstall of a running
// plugin takes effect at its next launch (its launcher reads the
// lockfile); a reinstall of a plugin marked failed launches it again at
// once, with its restart budget whole.
func (in *Installer) Install(ctx context.Context, dir string) (any, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	e, name, err := Install(ctx, dir, in.PluginsDir, in.Lockfile, in.Host.Options())
	if err != nil {
		return nil, err
	}
	res := InstallResult{Name: name, ProtocolVersion: e.ProtocolVersion, BinarySHA256: e.BinarySHA256, ManifestSHA256: e.ManifestSHA256}
	err = AddInstalled(in.Host, name, in.Lockfile)
	if errors.Is(err, host.ErrNameTaken) {
		err = in.Host.Revive(name)
	}
	for _, s := range in.Host.Status() {
		if s.Name == name {
			res.State, res.LastFailure = s.State, s.LastFailure
		}
	}
	if err != nil && res.LastFailure == "" {
		res.LastFailure = err.Error()
	}
	return res, nil
}
