package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// benchPlugin is the plugin the benchmark's handles are issued to, and
// the name it launches its load generator as a plugin under.
const benchPlugin = "bench"

// startServeBinary runs the airlock binary as users run it: `airlock
// serve` with its config file, JSON logging at info level and every audit
// line written to a file (audit.log in dir). It issues a handle with
// `airlock handle issue`. Its intercept CA is the in-process airlock
// role's (already written in dir), so one client trust store serves both;
// its admin listener serves Go's profiling endpoints (--pprof) for
// -profile.
func startServeBinary(bin, dir, upstream string) serveProc {
	return startServeBinaryAs(bin, dir, upstream, "", "")
}

// startServeBinaryAs is startServeBinary for a second serve beside the
// first: name sets its files apart ("" for the first), extra is appended
// to its config (a top-level block such as tracing:).
func startServeBinaryAs(bin, dir, upstream, name, extra string) serveProc {
	secrets := path(dir, "serve-secrets.yaml")
	check(os.WriteFile(secrets, []byte("bench/api: {token: "+benchSecret+"}\n"), 0o600))
	host, port, _ := strings.Cut(upstream, ":")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort())
	adminAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	cfg := path(dir, "serve"+name+".yaml")
	check(os.WriteFile(cfg, []byte(fmt.Sprintf(`version: v1
state_dir: %q
log: {format: json, level: info}
admin: {listen: %q}
broker:
  api: {socket: %q, token_file: %q}
  secrets: {file: %q}
  intents:
    bench:
      class: read
      secret: {source: file, path: bench/api, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: ["https://%s:%s/"]
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {%s: [%s]}
  intercept: {ca_file: %q, ca_key_file: %q}
  limits: {per_handle_rps: 1000000000, per_handle_burst: 1000000000, per_plugin_rps: 1000000000,
           per_plugin_burst: 1000000000, per_plugin_concurrency: 1048576}
`, path(dir, "serve-state"+name), adminAddr, path(dir, "broker"+name+".sock"), path(dir, "broker"+name+".token"), secrets, benchHost, port, addr,
		path(dir, "ca.pem"), benchHost, host, path(dir, "intercept-ca.pem"), path(dir, "intercept-ca.key"))+extra), 0o600))
	audit, err := os.Create(path(dir, "audit"+name+".log"))
	check(err)
	args := []string{"serve", "--config", cfg}
	if name == "" {
		args = append(args, "--pprof") // for -profile; an older binary to compare may not have it
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = audit, audit
	check(cmd.Start())
	waitListening(addr)
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err = exec.Command(bin, "handle", "issue", "--config", cfg, "--plugin", benchPlugin, "--invocation", "bench",
			"--intent", "bench", "--ttl", "1h").CombinedOutput()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	check(err)
	m := regexp.MustCompile(`handle:\s+(alh_\S+)`).FindSubmatch(out)
	if m == nil {
		check(fmt.Errorf("airlock handle issue printed no handle"))
	}
	return serveProc{addr: addr, admin: adminAddr, handle: string(m[1]), cmd: cmd, config: cfg}
}

// serveProc is a running `airlock serve`.
type serveProc struct {
	addr, admin, handle string
	cmd                 *exec.Cmd
	config              string // its config file
}

// auditLines counts the audit records the serve binary wrote.
func auditLines(dir string) int {
	f, err := os.Open(path(dir, "audit.log"))
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"log":"audit"`) {
			n++
		}
	}
	return n
}
