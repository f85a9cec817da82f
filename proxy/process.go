package proxy

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// The HMAC processor: a signature keyed with the secret.
func init() {
	registerInjector("hmac", kindFuncs[*broker.HMACInject]{onProcess: func(r *http.Request, x *exchange, k *broker.HMACInject) *denial {
		return signHMAC(r, x, k, time.Now())
	}})
}

// bufferBody reads the request body (already bounded by
// max_request_body) so it can be signed, and puts it back.
func bufferBody(r *http.Request, x *exchange) ([]byte, *denial) {
	if x.replay != nil || r.Body == nil || r.Body == http.NoBody {
		return x.replay, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		// Too large (max_request_body) or malformed (a bad chunk): the
		// answer the rest of the proxy gives for either.
		return nil, bodyDenial(err)
	}
	r.Body.Close()
	setBody(r, b)
	x.replay = b
	return b, nil
}

func setBody(r *http.Request, b []byte) {
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	if len(b) == 0 {
		r.Body = http.NoBody
	}
}

func signHMAC(r *http.Request, x *exchange, h *broker.HMACInject, now time.Time) *denial {
	body, d := bufferBody(r, x)
	if d != nil {
		return d
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	msg := h.Message
	if msg == "" {
		msg = "{{body}}"
	}
	sum := sha256.Sum256(body)
	msg = strings.NewReplacer("{{method}}", r.Method, "{{path}}", requestTarget(r.URL), "{{timestamp}}", ts,
		"{{body_sha256}}", hex.EncodeToString(sum[:]), "{{body}}", string(body)).Replace(msg)
	newHash := sha256.New
	if h.Algorithm == "sha512" {
		newHash = func() hash.Hash { return sha512.New() }
	}
	mac := hmac.New(newHash, []byte(x.secret.Value))
	mac.Write([]byte(msg))
	raw := mac.Sum(nil)
	sig := hex.EncodeToString(raw)
	if h.Encoding == "base64" {
		sig = base64.StdEncoding.EncodeToString(raw)
	}
	tmpl := h.Template
	if tmpl == "" {
		tmpl = broker.SignaturePlaceholder
	}
	r.Header.Del(h.Header)
	r.Header.Set(h.Header, strings.NewReplacer(broker.SignaturePlaceholder, sig, "{{timestamp}}", ts).Replace(tmpl))
	if h.TimestampHeader != "" {
		r.Header.Set(h.TimestampHeader, ts)
	}
	return nil
}
