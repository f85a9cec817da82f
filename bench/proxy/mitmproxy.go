package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

const mitmName = "mitmproxy (addon)"

// mitmAddon is the injecting addon agent sandboxes run in front of their
// agents today: mitmproxy intercepts the agent's TLS with its own CA and
// an addon sets the credential on every request.
const mitmAddon = `import os

TOKEN = "Bearer " + os.environ["BENCH_TOKEN"]


class Inject:
    def request(self, flow):
        flow.request.headers["Authorization"] = TOKEN


addons = [Inject()]
`

// startMitmproxy runs `mitmdump -s addon.py` as such a sandbox does: its
// own CA (added to roots, which the clients use) intercepts the client's
// CONNECT, the addon injects the bench token, the upstream's certificate
// is verified against the bench CA, and its one line per flow goes to a
// log file. It returns the proxy address and the process.
func startMitmproxy(bin, dir string, roots *x509.CertPool) (string, *exec.Cmd) {
	conf := path(dir, "mitmproxy")
	check(os.MkdirAll(conf, 0o700))
	addon := path(dir, "inject.py")
	check(os.WriteFile(addon, []byte(mitmAddon), 0o600))
	port := freePort()
	logf, err := os.Create(path(dir, "mitmproxy.log"))
	check(err)
	cmd := exec.Command(bin, "--listen-host", "127.0.0.1", "--listen-port", strconv.Itoa(port),
		"--set", "confdir="+conf, "--set", "ssl_verify_upstream_trusted_ca="+path(dir, "ca.pem"), "-s", addon)
	cmd.Env = append(os.Environ(), "BENCH_TOKEN="+benchSecret)
	cmd.Stdout, cmd.Stderr = logf, logf
	check(cmd.Start())
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitListening(addr)
	ca, err := os.ReadFile(path(conf, "mitmproxy-ca-cert.pem"))
	check(err)
	if !roots.AppendCertsFromPEM(ca) {
		check(fmt.Errorf("mitmproxy's CA certificate is not PEM"))
	}
	return addr, cmd
}
