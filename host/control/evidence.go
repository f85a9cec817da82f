package control

import (
	"encoding/json"
	"net/http"

	"github.com/airlock-dev/airlock/host/evidence"
)

// evidenceRoutes serve the evidence log's head and the key that signs
// it, for auditors to save and check against later.
func (c *Handler) evidenceRoutes() {
	opts := c.h.Options()
	c.mux.HandleFunc("GET /v1/evidence/head", func(w http.ResponseWriter, _ *http.Request) {
		var cp *evidence.Checkpoint
		if opts.Evidence != nil {
			cp = opts.Evidence.LatestCheckpoint()
		}
		if cp == nil {
			writeError(w, http.StatusNotFound, "no_checkpoint", "the evidence log has no signed checkpoint yet")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(cp)
	})
	c.mux.HandleFunc("GET /v1/evidence/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		if opts.EvidenceKey == nil {
			writeError(w, http.StatusNotFound, "no_key", "this host signs no checkpoints")
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(opts.EvidenceKey.JWKS())
	})
}
