package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlockProcess runs the airlock binary as a process of its own (the
// same uid as airlock serve, as a plugin sandboxed with Landlock is) and
// returns its output and exit code.
func airlockProcess(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(airlockBin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "AIRLOCK_CONFIG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// flipBit writes a copy of the token file with one bit of its first
// character flipped (still printable: base64url characters stay ASCII
// graphics with their lowest bit flipped).
func flipBit(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Clone(b)
	b[0] ^= 1
	p := filepath.Join(t.TempDir(), "flipped.token")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A process of airlock serve's own uid, admitted by the socket's peer
// check, still cannot mint a handle without the broker token: no token
// and a bit-flipped token are refused with Unauthenticated, nothing is
// minted, and no message shows either token. The host's token works.
func TestBrokerAPIRefusesCallerWithoutToken(t *testing.T) {
	admin := testenv.FreeAddr(t)
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/api: {token: demo-secret}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "broker.sock")
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
admin: {listen: %q}
broker:
  api: {socket: %q}
  secrets: {file: %q}
  intents:
    demo.write:
      class: write
      secret: {source: file, path: demo/api, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: ["https://api.demo.test/"]
`, admin, sock, secrets))
	_, logs := startServeProcess(t, nil, cfg, admin)
	tokenFile := filepath.Join(dir, "run", "broker.token")
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("serve created the token file %v %v, want mode 0600", st, err)
	}
	token, _ := os.ReadFile(tokenFile)
	tok := strings.TrimSpace(string(token))
	flipped := flipBit(t, tokenFile)
	flippedTok, _ := os.ReadFile(flipped)

	// A raw gRPC client on the socket, no token.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = brokerv1.NewBrokerServiceClient(conn).IssueHandle(context.Background(), &brokerv1.IssueHandleRequest{
		PluginId: "victim", InvocationId: "inv-stolen", Intent: "demo.write"})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "broker.api.token_file") {
		t.Fatalf("IssueHandle without a token: %v, want Unauthenticated naming broker.api.token_file", err)
	}

	issue := []string{"handle", "issue", "--broker", sock, "--plugin", "victim", "--invocation", "inv-stolen", "--intent", "demo.write"}
	for _, c := range []struct{ name, tokenFile, want string }{
		{"bit-flipped token", flipped, "the token presented is not the one in broker.api.token_file"},
		{"missing token file", filepath.Join(dir, "absent.token"), "broker.api.token_file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := airlockProcess(t, append(issue[:2:2], append([]string{"--broker-token-file", c.tokenFile}, issue[2:]...)...)...)
			if code == 0 || !strings.Contains(out, c.want) || strings.Contains(out, "alh_") {
				t.Fatalf("exit %d, want a refusal containing %q:\n%s", code, c.want, out)
			}
			if strings.Contains(out, tok) || strings.Contains(out, strings.TrimSpace(string(flippedTok))) {
				t.Fatalf("the refusal shows a token:\n%s", out)
			}
		})
	}
	// Nothing was minted for the victim's invocation.
	if out, code := airlockProcess(t, "handle", "revoke", "--broker", sock, "--invocation", "inv-stolen"); code != 0 ||
		!strings.Contains(out, "revoked 0 live handle(s)") {
		t.Fatalf("revoke with the token: exit %d\n%s", code, out)
	}
	// With the token (beside the socket, where serve made it) the same
	// command works (for an invocation not revoked above).
	ok := append(append([]string(nil), issue[:7]...), "inv-operator", "--intent", "demo.write")
	if out, code := airlockProcess(t, ok...); code != 0 || !strings.Contains(out, "handle:       alh_") {
		t.Fatalf("issue with the token: exit %d\n%s", code, out)
	}
	if l := logs.String(); strings.Contains(l, tok) || !strings.Contains(l, "broker API: call refused") {
		t.Fatalf("serve's log shows the token or no refusal:\n%s", l)
	}
}

// A broker socket that does not exist is a clear error naming the
// setting, not a raw gRPC transport error.
func TestBrokerCLIMissingSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "broker.sock")
	out, code := airlockProcess(t, "handle", "inspect", "--broker", sock, "0123456789abcdef")
	if code == 0 || !strings.Contains(out, "no socket at "+sock) || !strings.Contains(out, "broker.api.socket") ||
		strings.Contains(out, "rpc error") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// check-config refuses a control API on TCP that nothing authenticates,
// and a token in clear beyond loopback; it accepts TCP on loopback with a
// token file. It refuses a key or token file its group or others may read.
func TestCheckConfigControlAuthority(t *testing.T) {
	for _, c := range []struct {
		name, host, want string
	}{
		{"tcp without authority", `{control: "127.0.0.1:19465"}`, "a TCP control API needs host.control_tls (mutual TLS), host.control_token_file or host.control_principals"},
		{"token in clear beyond loopback", `{control: "0.0.0.0:19465", control_token_file: /etc/airlock/control.token}`, "crosses the network in clear"},
		{"tls incomplete", `{control: "0.0.0.0:19465", control_tls: {cert_file: /c.pem}}`, "host.control_tls: cert_file, key_file and client_ca_file are required"},
		{"uids on tcp", `{control: "127.0.0.1:19465", control_token_file: /t, control_allowed_uids: [1]}`, "only for a unix control socket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := cli(t, nil, "", "check-config", writeConfig(t, "version: v1\nhost: "+c.host+"\n"))
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, want 1 with %q:\n%s", code, c.want, stderr)
			}
		})
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "control.token")
	if out, stderr, code := cli(t, nil, "", "check-config", writeConfig(t, fmt.Sprintf("version: v1\nstate_dir: %q\nhost: {control: \"127.0.0.1:19465\", control_token_file: %q}\n", dir, tokenFile))); code != 0 {
		t.Fatalf("tcp on loopback with a token file: exit %d\n%s%s", code, out, stderr)
	}
	if err := os.WriteFile(tokenFile, []byte(strings.Repeat("t", 43)+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := cli(t, nil, "", "check-config", writeConfig(t, fmt.Sprintf("version: v1\nstate_dir: %q\nhost: {control: \"127.0.0.1:19465\", control_token_file: %q}\n", dir, tokenFile)))
	if code != 1 || !strings.Contains(stderr, "host.control_token_file") || !strings.Contains(stderr, "its group may read it") || strings.Contains(stderr, "ttttt") {
		t.Fatalf("a group-readable control token: exit %d\n%s", code, stderr)
	}
}
