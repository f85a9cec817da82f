package proxy

import (
	"bytes"
	"cmp"
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

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/airlock-dev/airlock/broker"
)

// process applies a processor inject kind to r, the request exactly as
// it will be sent (https URL, final headers): it signs it (hmac,
// aws_sigv4) or sets an access token (oauth2_*). It runs last in prepare,
// and again on a retry; x.forms gains what the echo guard must catch.
func (s *Server) process(r *http.Request, x *exchange) *denial {
	in := x.intent.Inject
	x.audit.Processor = in.Processor()
	switch {
	case in.HMAC != nil:
		return signHMAC(r, x, in.HMAC, time.Now())
	case in.AWSSigV4 != nil:
		return signSigV4(r, x, in.AWSSigV4, time.Now())
	case in.Token() != nil:
		return s.setToken(r, x)
	}
	return nil
}

// bufferBody reads the request body (already bounded by
// max_request_body) so it can be signed, and puts it back.
func bufferBody(r *http.Request, x *exchange) ([]byte, *denial) {
	if x.replay != nil || r.Body == nil || r.Body == http.NoBody {
		return x.replay, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, deny(CodeBodyTooLarge, "the request body could not be read in full for signing")
	}
	r.Body.Close()
	setBody(r, b)
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
	msg = strings.NewReplacer("{{method}}", r.Method, "{{path}}", r.URL.RequestURI(), "{{timestamp}}", ts,
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

// sigv4Headers are what a plugin's SDK may have signed with a dummy key;
// they are replaced.
var sigv4Headers = []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// unsignedPayload is S3's marker for a body that is not hashed.
const unsignedPayload = "UNSIGNED-PAYLOAD"

func signSigV4(r *http.Request, x *exchange, c *broker.SigV4Inject, now time.Time) *denial {
	idField, tokField := c.AccessKeyIDField, c.SessionTokenField
	if idField == "" {
		idField = "access_key_id"
	}
	if tokField == "" {
		tokField = "session_token"
	}
	keyID := x.secret.Fields[idField]
	if keyID == "" || badHeaderValue(keyID) {
		return deny(CodeSecretInvalid, "the bound secret has no usable access key id").withReason("field " + idField + " missing or invalid")
	}
	service, region := c.Service, c.Region
	if service == "" || region == "" {
		ps, pr, ok := awsServiceRegion(r.URL.Hostname())
		if !ok {
			return deny(CodeSigningFailed, "the AWS service and region could not be derived from the host; set them in the intent binding")
		}
		service, region = cmp.Or(service, ps), cmp.Or(region, pr)
	}
	for _, h := range sigv4Headers {
		r.Header.Del(h)
	}
	payload := unsignedPayload
	if !c.UnsignedPayload {
		body, d := bufferBody(r, x)
		if d != nil {
			return d
		}
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	r.Header.Set("X-Amz-Content-Sha256", payload)
	creds := aws.Credentials{AccessKeyID: keyID, SecretAccessKey: x.secret.Value, SessionToken: x.secret.Fields[tokField]}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = service == "s3" })
	if err := signer.SignHTTP(r.Context(), creds, r, payload, service, region, now); err != nil {
		return deny(CodeSigningFailed, "the request could not be signed").withReason("sigv4: " + err.Error())
	}
	if creds.SessionToken != "" {
		x.forms = cachedForms(formsKey{secret: x.secret.Value, derived: creds.SessionToken}, func() []string {
			return append(encodings(x.secret.Value), encodings(creds.SessionToken)...)
		})
	}
	return nil
}

// awsServiceRegion reads the service and region from an AWS endpoint
// host: <service>.<region>.amazonaws.com, <bucket>.s3.<region>…,
// s3.amazonaws.com and other global endpoints (us-east-1).
func awsServiceRegion(host string) (service, region string, ok bool) {
	rest, found := strings.CutSuffix(host, ".amazonaws.com")
	if !found || rest == "" {
		return "", "", false
	}
	labels := strings.Split(rest, ".")
	if i := lastIndex(labels, "s3"); i >= 0 {
		// <bucket>.s3.<region> or s3.<region> or (<bucket>.)s3
		if i == len(labels)-1 {
			return "s3", "us-east-1", true
		}
		return "s3", labels[i+1], true
	}
	switch len(labels) {
	case 1:
		return labels[0], "us-east-1", true
	case 2:
		return labels[0], labels[1], true
	}
	return "", "", false
}

func lastIndex(ss []string, v string) int {
	for i := len(ss) - 1; i >= 0; i-- {
		if ss[i] == v {
			return i
		}
	}
	return -1
}
