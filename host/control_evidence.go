package host

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"

	"github.com/airlock-dev/airlock/host/evidence"
)

// InstallRequest is the body of POST /v1/plugins: a package directory
// (provider + manifest.yaml) the host can read.
type InstallRequest struct {
	Dir string `json:"dir"`
}

// InstallResult answers POST /v1/plugins.
type InstallResult struct {
	Name            string `json:"name"`
	ProtocolVersion uint32 `json:"protocol_version"`
	BinarySHA256    string `json:"binary_sha256"`
	ManifestSHA256  string `json:"manifest_sha256"`
	State           State  `json:"state"`
	LastFailure     string `json:"last_failure,omitempty"`
}

// EnableInstall lets the control API install packages into pluginsDir and
// lockfile while the host runs (POST /v1/plugins): the running host is the
// evidence log's only writer, so an install while it runs must go through
// it. The new provider is launched at once.
func (h *Host) EnableInstall(pluginsDir, lockfile string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pluginsDir, h.lockfile = pluginsDir, lockfile
}

func (h *Host) evidenceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/evidence/head", func(w http.ResponseWriter, _ *http.Request) {
		var cp *evidence.Checkpoint
		if h.opts.Evidence != nil {
			cp = h.opts.Evidence.LatestCheckpoint()
		}
		if cp == nil {
			controlError(w, http.StatusNotFound, "no_checkpoint", "the evidence log has no signed checkpoint yet")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(cp)
	})
	mux.HandleFunc("GET /v1/evidence/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		if h.opts.EvidenceKey == nil {
			controlError(w, http.StatusNotFound, "no_key", "this host signs no checkpoints")
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(h.opts.EvidenceKey.JWKS())
	})
	mux.HandleFunc("POST /v1/plugins", h.serveInstall)
}

func (h *Host) serveInstall(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	dir, lock := h.pluginsDir, h.lockfile
	h.mu.Unlock()
	if dir == "" {
		controlError(w, http.StatusNotFound, "install_disabled", "this host does not install plugins over the control API")
		return
	}
	var req InstallRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || !filepath.IsAbs(req.Dir) {
		controlError(w, http.StatusBadRequest, "bad_request", "the body must be {\"dir\": an absolute path}")
		return
	}
	// One install at a time: the lockfile is read, changed and written.
	h.installMu.Lock()
	defer h.installMu.Unlock()
	e, name, err := Install(r.Context(), req.Dir, dir, lock, h.opts)
	if err != nil {
		controlError(w, http.StatusUnprocessableEntity, "install_failed", err.Error())
		return
	}
	res := InstallResult{Name: name, ProtocolVersion: e.ProtocolVersion, BinarySHA256: e.BinarySHA256, ManifestSHA256: e.ManifestSHA256}
	err = h.AddInstalled(name, lock)
	if errors.Is(err, ErrNameTaken) {
		// A reinstall of a running plugin takes effect at its next launch
		// (its launcher reads the lockfile).
		err = nil
	}
	s := statusNamed(h, name)
	res.State, res.LastFailure = s.State, s.LastFailure
	if err != nil && res.LastFailure == "" {
		res.LastFailure = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

func statusNamed(h *Host, name string) Status {
	for _, s := range h.Status() {
		if s.Name == name {
			return s
		}
	}
	return Status{Name: name}
}
