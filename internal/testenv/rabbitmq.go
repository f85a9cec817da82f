//go:build linux

package testenv

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RabbitMQServer is a running rabbitmq-server with the management plugin
// (its HTTP API takes Basic auth), under a temporary directory of its own:
// its own node name, ports, Mnesia and log directories, enabled-plugins
// file and epmd, never the system service.
type RabbitMQServer struct {
	APIURL   string // http://127.0.0.1:PORT, the management HTTP API
	AMQPAddr string // 127.0.0.1:PORT
	// Admin and AdminPassword are its administrator (the user Vault's
	// RabbitMQ secrets engine connects as).
	Admin, AdminPassword string

	dir  string
	epmd *process
	proc *process
}

var sharedRabbit struct {
	once sync.Once
	srv  *RabbitMQServer
	err  error
}

// RabbitMQ returns the rabbitmq-server shared by the test package, started
// on first use (Erlang takes seconds to start and much memory: one per
// package) and stopped by Main.
func RabbitMQ(tb testing.TB) *RabbitMQServer {
	tb.Helper()
	bin, ok := rabbitBinary()
	if !ok {
		missing(tb, "rabbitmq-server")
	}
	sharedRabbit.once.Do(func() { sharedRabbit.srv, sharedRabbit.err = startRabbitMQ(bin) })
	if sharedRabbit.err != nil {
		tb.Fatalf("start rabbitmq-server: %v", sharedRabbit.err)
	}
	return sharedRabbit.srv
}

// rabbitBinary finds the server script itself: Debian's /usr/sbin wrapper
// switches to the rabbitmq user and the system directories.
func rabbitBinary() (string, bool) {
	if p := os.Getenv("RABBITMQ_SERVER_BIN"); p != "" {
		return p, isExecutable(p)
	}
	const debian = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	return debian, isExecutable(debian)
}

func startRabbitMQ(bin string) (*RabbitMQServer, error) {
	var ports [4]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	amqp, api, dist, epmdPort := ports[0], ports[1], ports[2], ports[3]
	dir, err := os.MkdirTemp("", "airlock-rabbitmq-")
	if err != nil {
		return nil, err
	}
	r := &RabbitMQServer{APIURL: "http://" + loopback(api), AMQPAddr: loopback(amqp),
		Admin: "airlock-admin", AdminPassword: randomToken(""), dir: dir}
	conf := fmt.Sprintf("listeners.tcp.default = %s\nmanagement.tcp.port = %d\nmanagement.tcp.ip = 127.0.0.1\n"+
		"default_user = %s\ndefault_pass = %s\ndefault_user_tags.administrator = true\n"+
		"default_permissions.configure = .*\ndefault_permissions.read = .*\ndefault_permissions.write = .*\n",
		r.AMQPAddr, api, r.Admin, r.AdminPassword)
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[rabbitmq_management].\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			r.Stop()
			return nil, err
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"ERL_EPMD_PORT=" + strconv.Itoa(epmdPort), "ERL_EPMD_ADDRESS=127.0.0.1"}
	// Our own epmd, in the foreground, so it dies with the test (the one
	// Erlang starts by itself daemonizes and outlives it).
	epmd, err := startProcess("epmd", []string{"-port", strconv.Itoa(epmdPort)}, env, dir)
	if err != nil {
		r.Stop()
		return nil, fmt.Errorf("exec epmd: %w", err)
	}
	r.epmd = epmd
	env = append(env,
		"RABBITMQ_NODENAME=airlock-"+randomToken("")[:8]+"@localhost",
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist))
	if r.proc, err = startProcess(bin, nil, env, dir); err != nil {
		r.Stop()
		return nil, fmt.Errorf("exec %s: %w", bin, err)
	}
	if err := r.waitReady(2 * time.Minute); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

func (r *RabbitMQServer) waitReady(limit time.Duration) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r.proc.exited() {
			return r.proc.describe("rabbitmq-server")
		}
		req, _ := http.NewRequest(http.MethodGet, r.APIURL+"/api/whoami", nil)
		req.SetBasicAuth(r.Admin, r.AdminPassword)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("rabbitmq-server not ready after %s; output:\n%s", limit, r.proc.out.String())
}

// Stop stops the server (Erlang shuts down on SIGTERM in seconds) and its
// epmd, and removes its directory.
func (r *RabbitMQServer) Stop() {
	if r.proc != nil && !r.proc.exited() {
		r.proc.signal(syscall.SIGTERM)
		select {
		case <-r.proc.done:
		case <-time.After(20 * time.Second):
			r.proc.signal(syscall.SIGKILL)
			<-r.proc.done
		}
	}
	if r.epmd != nil {
		r.epmd.stop(2 * time.Second)
	}
	os.RemoveAll(r.dir)
}

// WhoAmI asks the management API who user is: the HTTP status (200 while
// the user exists with that password and may use the API, 401 after).
func (r *RabbitMQServer) WhoAmI(user, password string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, r.APIURL+"/api/whoami", nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
