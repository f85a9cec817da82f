package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/airlock-dev/airlock/host"
	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/internal/config"
)

// InstallPort runs `airlock ports install FILE`: review the descriptor
// set, keep it under the state directory and pin its digest in the
// lockfile. When an airlock host runs (it holds the state directory) the
// install goes through its control API (POST /v1/ports) and the port is
// served at once; remote reports that.
func InstallPort(ctx context.Context, cfg *config.Config, set []byte, replace bool) (res pluginv1.PortResult, remote bool, err error) {
	lock, err := host.LockStateDir(cfg.StateDir)
	if errors.Is(err, host.ErrStateDirInUse) {
		body, _ := json.Marshal(hostcontrol.PortInstallRequest{Set: base64.StdEncoding.EncodeToString(set), Replace: replace})
		err := portRequest(ctx, cfg, http.MethodPost, "/v1/ports", body, &res)
		return res, true, err
	}
	if err != nil {
		return res, false, err
	}
	defer lock.Release()
	ports := Ports()
	if _, err := pluginv1.LoadPorts(ports, cfg.Host.Lockfile); err != nil {
		return res, false, err
	}
	in, err := pluginv1.InstallPort(set, replace, pluginv1.PortsDir(cfg.StateDir), cfg.Host.Lockfile, ports)
	if err != nil {
		return res, false, err
	}
	return pluginv1.PortResult{Name: in.Port.Name, Source: "installed", SHA256: in.Port.SHA256, Replaced: in.Replaced,
		Methods: in.Port.Methods}, false, nil
}

// RemovePort runs `airlock ports remove NAME`, through the running
// host's control API (DELETE /v1/ports/NAME) when there is one.
func RemovePort(ctx context.Context, cfg *config.Config, name string) (remote bool, err error) {
	lock, err := host.LockStateDir(cfg.StateDir)
	if errors.Is(err, host.ErrStateDirInUse) {
		return true, portRequest(ctx, cfg, http.MethodDelete, "/v1/ports/"+name, nil, nil)
	}
	if err != nil {
		return false, err
	}
	defer lock.Release()
	return false, pluginv1.RemovePort(name, pluginv1.PortsDir(cfg.StateDir), cfg.Host.Lockfile, Ports())
}

// portRequest calls the running host's control API; out receives the
// answer.
func portRequest(ctx context.Context, cfg *config.Config, method, path string, body []byte, out any) error {
	client, base := ControlClient(cfg.Host.Control, ControlClientOptions{TokenFile: cfg.Host.ControlTokenFile})
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w, and its control API at %s did not answer: %v", host.ErrStateDirInUse, cfg.Host.Control, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Detail string }
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("the running host refused: %s: %s", e.Error, e.Detail)
	}
	if out != nil && json.Unmarshal(b, out) != nil {
		return errors.New("the running host's answer is not a port result")
	}
	return nil
}
