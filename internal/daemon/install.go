package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"

	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/pluginv1"
)

// installRemote asks the running host at control (host:port or
// unix:/path) to install dir; running says how its presence was seen
// (ErrStateDirInUse, ErrEvidenceInUse).
func installRemote(ctx context.Context, control string, co ControlClientOptions, dir string, running error) (pluginv1.InstallResult, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return pluginv1.InstallResult{}, err
	}
	client, base := ControlClient(control, co)
	body, _ := json.Marshal(hostcontrol.InstallRequest{Dir: abs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/plugins", bytes.NewReader(body))
	if err != nil {
		return pluginv1.InstallResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return pluginv1.InstallResult{}, fmt.Errorf("%w, and its control API at %s did not answer: %v", running, control, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Detail string }
		_ = json.Unmarshal(b, &e)
		return pluginv1.InstallResult{}, fmt.Errorf("the running host refused the install: %s: %s", e.Error, e.Detail)
	}
	var res pluginv1.InstallResult
	if err := json.Unmarshal(b, &res); err != nil {
		return pluginv1.InstallResult{}, fmt.Errorf("the running host's answer is not an install result")
	}
	return res, nil
}
