package proxy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/airlock-dev/airlock/broker"
)

// The AWS SigV4 processor: the AWS SDK's signer, keyed with the secret.
func init() {
	registerInjector("aws_sigv4", kindFuncs[*broker.SigV4Inject]{onProcess: func(r *http.Request, x *exchange, k *broker.SigV4Inject) *denial {
		return signSigV4(r, x, k, time.Now())
	}})
}

// sigv4Headers are what a plugin's SDK may have signed with a dummy key;
// they are replaced.
var sigv4Headers = []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// presignParams mark a presigned URL (SigV4 and SigV2): its credential
// is in the query, where the plugin's SDK put the handle. The proxy
// signs in headers; it refuses such a URL rather than send the handle
// next to its own signature.
var presignParams = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "AWSAccessKeyId"}

// unsignedPayload is S3's marker for a body that is not hashed.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// signSigV4 signs r as it will be sent: the path and query the client
// sent, byte for byte, are what the signature covers. The AWS SDK's
// signer derives its canonical request from a URL it re-encodes (and
// writes its own query back), so it signs a copy of r whose URL holds
// the canonical path and the decoded parameters; r's URL is untouched
// and only its headers gain the signature.
func signSigV4(r *http.Request, x *exchange, c *broker.SigV4Inject, now time.Time) *denial {
	idField, tokField := cmp.Or(c.AccessKeyIDField, "access_key_id"), cmp.Or(c.SessionTokenField, "session_token")
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
	rawPath, rawQuery, _ := strings.Cut(requestTarget(r.URL), "?")
	params, ok := sigv4Params(rawQuery)
	if !ok {
		return deny(CodeBadRequest, "the query holds an invalid percent escape; it cannot be signed as sent")
	}
	for k := range params {
		for _, p := range presignParams {
			if strings.EqualFold(k, p) {
				return deny(CodePresigned, "presigned URLs are not supported: the proxy signs each request itself; send the plain request with the handle as the access key id").
					withReason("query parameter " + p)
			}
		}
	}
	canonicalPath, ok := sigv4CanonicalPath(rawPath, service == "s3")
	if !ok {
		return deny(CodePathNotAllowed, "the request path holds an invalid escape")
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
	// The signer reads an Opaque URL's path from its first '/' after a
	// leading "//authority", so "//-" keeps a canonical path that itself
	// starts with "//"; it must not escape it again.
	signed := *r
	u := *r.URL
	u.Opaque, u.RawPath, u.RawQuery = "//-"+canonicalPath, "", params.Encode()
	signed.URL = &u
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(r.Context(), creds, &signed, payload, service, region, now); err != nil {
		return deny(CodeSigningFailed, "the request could not be signed").withReason("sigv4: " + err.Error())
	}
	// The access key id is not secret, but it names the account: the
	// echo guard keeps it from the plugin too.
	x.forms = cachedForms(formsKey{secret: x.secret.Value, derived: keyID + "\x00" + creds.SessionToken}, func() []string {
		return secretForms(x.secret.Value, keyID, creds.SessionToken)
	})
	return nil
}

// sigv4Params decodes a raw query for signing. Only percent escapes are
// decoded: a '+' is a plus sign (RFC 3986; S3 reads it so), never a
// space, and a ';' is an ordinary character. Empty pairs are skipped.
func sigv4Params(raw string) (url.Values, bool) {
	vals := url.Values{}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		dk, err1 := url.PathUnescape(k)
		dv, err2 := url.PathUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		vals[dk] = append(vals[dk], dv)
	}
	return vals, true
}

// sigv4CanonicalPath is SigV4's canonical URI for a raw path. S3: each
// segment decoded and encoded once, nothing resolved (a key may hold
// "//" and ".."). Other services: dot and empty segments resolved, then
// the raw path encoded (escapes are encoded twice), as AWS's SDKs do.
func sigv4CanonicalPath(raw string, s3 bool) (string, bool) {
	if !s3 {
		return awsEscape(removeDotSegments(raw), true), true
	}
	segs := strings.Split(raw, "/")
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", false
		}
		segs[i] = awsEscape(d, false)
	}
	return strings.Join(segs, "/"), true
}

// removeDotSegments resolves "." and ".." and drops empty segments,
// keeping a leading and a trailing slash.
func removeDotSegments(p string) string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	res := "/" + strings.Join(out, "/")
	if strings.HasSuffix(p, "/") && len(out) > 0 {
		res += "/"
	}
	return res
}

// awsEscape is SigV4's UriEncode: every byte but A-Z a-z 0-9 - . _ ~
// (and '/' when keepSlash) as %XX with upper-case hex.
func awsEscape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' ||
			c == '/' && keepSlash {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
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
