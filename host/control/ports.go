package control

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
)

// MaxPortSetBytes bounds a descriptor set sent to POST /v1/ports.
const MaxPortSetBytes = 8 << 20

// PortInstallRequest is the body of POST /v1/ports: the descriptor set
// (protoc --include_imports --descriptor_set_out, or a buf image) as
// base64 in Set, or an absolute Path the host can read; Replace installs
// it over a port installed with another digest.
type PortInstallRequest struct {
	Set     string `json:"set,omitempty"`
	Path    string `json:"path,omitempty"`
	Replace bool   `json:"replace,omitempty"`
}

// Ports installs, removes and lists the ports a host serves while it
// runs (pluginv1.PortInstaller is the one). Results are the answers'
// JSON bodies; an error's text is the answer's detail.
type Ports interface {
	InstallPort(ctx context.Context, set []byte, replace bool) (any, error)
	RemovePort(ctx context.Context, name string) (any, error)
	ListPorts(ctx context.Context) (any, error)
}

var portRoute = regexp.MustCompile(`^numinance\.ports\.[a-z][a-z0-9_]*\.v[1-9][0-9]*$`)

// EnablePorts serves the host's ports on the control API:
//
//   - GET /v1/ports: every port served, compiled and installed, with
//     each method's risk class, execution mode, dry run support, side
//     effect and declared evidence; installed ports refused at start,
//     with why.
//   - POST /v1/ports (PortInstallRequest): review, store, pin and serve
//     a descriptor set at once; 422 install_failed with the reason.
//   - DELETE /v1/ports/{name}: stop serving an installed port and remove
//     it.
//
// Installing and removing a port are operator acts (SetOperator): a
// port's method rules are what the policy reads, so a principal that is
// no operator is refused 403 not_an_operator. Listing needs the control
// API's authentication only.
func (c *Handler) EnablePorts(p Ports) {
	c.mux.HandleFunc("GET /v1/ports", func(w http.ResponseWriter, r *http.Request) {
		res, err := p.ListPorts(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		writePortJSON(w, res)
	})
	c.mux.HandleFunc("POST /v1/ports", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := c.operatorOnly(w, r, "installs a port"); !ok {
			return
		}
		set, replace, ok := readPortSet(w, r)
		if !ok {
			return
		}
		res, err := p.InstallPort(r.Context(), set, replace)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "install_failed", err.Error())
			return
		}
		writePortJSON(w, res)
	})
	c.mux.HandleFunc("DELETE /v1/ports/{name}", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := c.operatorOnly(w, r, "removes a port"); !ok {
			return
		}
		name := r.PathValue("name")
		if !portRoute.MatchString(name) {
			writeError(w, http.StatusBadRequest, "bad_request", "the name must be numinance.ports.<name>.v<major>")
			return
		}
		res, err := p.RemovePort(r.Context(), name)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "remove_failed", err.Error())
			return
		}
		writePortJSON(w, res)
	})
}

// readPortSet reads a PortInstallRequest and the set it names; on a bad
// request it answers and reports false.
func readPortSet(w http.ResponseWriter, r *http.Request) ([]byte, bool, bool) {
	var req PortInstallRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxPortSetBytes*4/3+4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || (req.Set == "") == (req.Path == "") {
		badBody(w, err, `the body must be {"set": base64} or {"path": an absolute path}, and "replace" when meant`)
		return nil, false, false
	}
	if req.Set != "" {
		set, err := base64.StdEncoding.DecodeString(req.Set)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "set: not standard base64")
			return nil, false, false
		}
		return set, req.Replace, true
	}
	if !filepath.IsAbs(req.Path) {
		writeError(w, http.StatusBadRequest, "bad_request", "path: must be absolute")
		return nil, false, false
	}
	set, err := readBounded(req.Path, MaxPortSetBytes)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "install_failed", err.Error())
		return nil, false, false
	}
	return set, req.Replace, true
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errors.New("path: the file is larger than the descriptor set bound")
	}
	return b, nil
}

func writePortJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
