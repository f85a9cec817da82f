package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
)

// startTokenizer runs superfly/tokenizer, the peer that does the same job
// (a proxy that injects a credential the client never holds), as its
// README deploys it: `tokenizer serve` with its own logging to a file, and
// a secret sealed with `tokenizer seal` that injects the bench token as
// "Authorization: Bearer" for a client that proves a bearer password. Its
// upstream trust comes from SSL_CERT_FILE; the secret is valid only for
// upstream (host:port), as tokenizer's allowed_hosts is meant to be used. It returns the proxy address,
// the headers every request carries and the process.
func startTokenizer(bin, dir, upstream string) (addr string, hdr http.Header, cmd *exec.Cmd) {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	check(err)
	env := append(os.Environ(), "OPEN_KEY="+hex.EncodeToString(key))
	const password = "bench-proxy-password"
	digest := sha256.Sum256([]byte(password))
	secret := fmt.Sprintf(`{"inject_processor":{"token":%q},"bearer_auth":{"digest":%q},"allowed_hosts":[%q]}`,
		benchSecret, base64.StdEncoding.EncodeToString(digest[:]), upstream)
	seal := exec.Command(bin, "seal", "-json", secret)
	seal.Env = env
	out, err := seal.Output()
	check(err)
	addr = fmt.Sprintf("127.0.0.1:%d", freePort())
	logf, err := os.Create(path(dir, "tokenizer.log"))
	check(err)
	cmd = exec.Command(bin, "serve")
	cmd.Env = append(env, "LISTEN_ADDRESS="+addr, "SSL_CERT_FILE="+path(dir, "ca.pem"))
	cmd.Stdout, cmd.Stderr = logf, logf
	check(cmd.Start())
	waitListening(addr)
	hdr = http.Header{"Proxy-Tokenizer": {strings.TrimSpace(string(out))}, "Proxy-Authorization": {"Bearer " + password}}
	return addr, hdr, cmd
}

// withHeaders adds h to every request; tokenizer takes its sealed secret
// and client proof as request headers.
type withHeaders struct {
	rt http.RoundTripper
	h  http.Header
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.rt.RoundTrip(r)
}
