package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

type wsClientCmd struct {
	name string
	cmd  func(t *testing.T, target string) *exec.Cmd
}

func wsClients() []wsClientCmd {
	return []wsClientCmd{
		{"python-websockets", func(_ *testing.T, target string) *exec.Cmd {
			return exec.Command(testenv.Python(), "testdata/ws_client.py", target)
		}},
		{"node-ws", func(t *testing.T, target string) *exec.Cmd {
			c := exec.Command("node", "testdata/ws_client.js", target)
			c.Env = []string{"AIRLOCK_TEST_WS_MODULE=" + testenv.NodeModule(t, "ws", "8.18.0")}
			return c
		}},
	}
}

// wsLine is one line a client prints.
type wsLine struct {
	Subprotocol *string `json:"subprotocol"`
	Sent        string  `json:"sent"`
	Got         string  `json:"got"`
	Ready       bool    `json:"ready"`
	CloseCode   *int    `json:"close_code"`
	CloseReason string  `json:"close_reason"`
	Connect     string  `json:"connect"`
	Error       string  `json:"error"`
}

func (w *wsFixture) runClient(t *testing.T, c wsClientCmd, handle, scenario string, each func(wsLine)) []wsLine {
	t.Helper()
	cmd := c.cmd(t, w.wsURL("wss"))
	proxyURL := "http://" + handle + "@" + w.addr
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir(), "PYTHONDONTWRITEBYTECODE=1",
		"HTTPS_PROXY="+proxyURL, "SSL_CERT_FILE="+w.caFile, "NODE_EXTRA_CA_CERTS="+w.caFile,
		"AIRLOCK_TEST_WS_SCENARIO="+scenario)
	var lines []wsLine
	runLines(t, cmd, func(b []byte) {
		var l wsLine
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("%s: %q: %v", c.name, b, err)
		}
		lines = append(lines, l)
		if each != nil {
			each(l)
		}
	})
	return lines
}

// Python and Node WebSocket clients through an intercepted tunnel: the
// subprotocol, messages both ways, the secret injected into the
// handshake, an echoed secret redacted (also across frames), a normal
// close, and a close with 1008 when the handle is revoked.
func TestWebSocketRealClients(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, c := range wsClients() {
		t.Run(c.name, func(t *testing.T) {
			lines := w.runClient(t, c, w.issueWS(t, "api.write", "inv-ws-"+c.name), "echo", nil)
			got := map[string]string{}
			var closeCode int
			for _, l := range lines {
				switch {
				case l.Error != "" || l.Connect != "":
					t.Fatalf("%+v", l)
				case l.Subprotocol != nil && *l.Subprotocol != "chat.v1":
					t.Fatalf("subprotocol %q", *l.Subprotocol)
				case l.Sent != "":
					got[l.Sent] = l.Got
				case l.CloseCode != nil:
					closeCode = *l.CloseCode
				}
			}
			if got["hello"] != "echo:hello" || !redacted(got["auth"]) || !redacted(got["split"]) || closeCode != 1000 {
				t.Fatalf("replies %q, close %d", got, closeCode)
			}
			if b, ok := got["bin"]; ok && b != base64.StdEncoding.EncodeToString([]byte("\x00\x01bin")) {
				t.Fatalf("binary reply %q", b)
			}
			if a := w.ws.LastAuth(t); a != "Bearer "+testSecret {
				t.Fatalf("the upstream saw Authorization %q", a)
			}

			inv := "inv-ws-revoke-" + c.name
			lines = w.runClient(t, c, w.issueWS(t, "api.write", inv), "revoke", func(l wsLine) {
				if l.Ready {
					if _, err := w.b.RevokeInvocation(context.Background(), inv); err != nil {
						t.Error(err)
					}
				}
			})
			last := lines[len(lines)-1]
			if last.CloseCode == nil || *last.CloseCode != 1008 || last.CloseReason != "airlock "+CodeHandleInvalid {
				t.Fatalf("after the revocation: %+v", last)
			}
		})
	}
}
