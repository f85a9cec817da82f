package control

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
)

// InstallRequest is the body of POST /v1/plugins: a package directory
// (provider + manifest.yaml) the host can read.
type InstallRequest struct {
	Dir string `json:"dir"`
}

// Installer installs a plugin package while the host runs and launches
// it (pluginv1.Installer is the one for plugin/v1 packages). Its result
// is the answer's JSON body; its error's text is the answer's detail, so
// it names no value a plugin supplied.
type Installer interface {
	Install(ctx context.Context, dir string) (any, error)
}

// EnableInstall lets the control API install packages while the host
// runs (POST /v1/plugins): the running host is the evidence log's only
// writer, so an install while it runs must go through it. The new plugin
// is launched at once.
func (c *Handler) EnableInstall(inst Installer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.installer = inst
}

func (c *Handler) serveInstall(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	inst := c.installer
	c.mu.Unlock()
	if inst == nil {
		writeError(w, http.StatusNotFound, "install_disabled", "this host does not install plugins over the control API")
		return
	}
	if _, ok := c.operatorOnly(w, r, "installs a plugin"); !ok {
		return
	}
	var req InstallRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || !filepath.IsAbs(req.Dir) {
		badBody(w, err, "the body must be {\"dir\": an absolute path}")
		return
	}
	res, err := inst.Install(r.Context(), req.Dir)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "install_failed", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}
