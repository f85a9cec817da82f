package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Keys of the processor tests' secrets (the file source's entries).
const (
	hmacKey      = "whsec-7c1e0f9a2b4d6e8f"
	awsKeyID     = "AKIDAIRLOCKTEST01"
	awsSecretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYAIRLOCKKEY"
	awsSession   = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN0123456789"
)

// verifier is an upstream that accepts a request only with a correct
// signature, recomputed here independently of the signing code.
type verifier struct {
	srv  *httptest.Server
	port int
	seen chan *http.Request
}

func startVerifier(t testing.TB, ca *testenv.CA, names ...string) *verifier {
	t.Helper()
	v := &verifier{seen: make(chan *http.Request, 64)}
	v.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ok := false
		switch {
		case strings.HasPrefix(r.URL.Path, "/hmac/sha256"):
			ok = r.Header.Get("X-Signature") == "sha256="+hexMAC(hmacKey, string(body))
		case strings.HasPrefix(r.URL.Path, "/hmac/stripe"):
			// t=<ts>,v1=<hex> over "<ts>.<body>", base64 sha512 in X-Sig-512.
			ts := r.Header.Get("X-Timestamp")
			mac := hmac.New(sha512.New, []byte(hmacKey))
			mac.Write([]byte(r.Method + "\n" + r.URL.RequestURI() + "\n" + ts + "\n" + hexSHA(body)))
			ok = ts != "" && r.Header.Get("X-Sig-512") == "t="+ts+",v1="+base64.StdEncoding.EncodeToString(mac.Sum(nil))
		default:
			ok = verifySigV4(r, body, awsSecretKey) == nil
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		v.seen <- r
		if !ok {
			http.Error(w, "signature does not match", http.StatusForbidden)
			return
		}
		// Echo what arrived, as a careless API might, and the access key
		// id in three spellings.
		id, _, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="), "/")
		_, _ = fmt.Fprintf(w, "verified %s key %s %s %s", r.Header.Get("Authorization"), id,
			base64.RawStdEncoding.EncodeToString([]byte(id)), url.QueryEscape(id+"/"))
	}))
	v.srv.TLS = tls12Config{}.config(ca, t)
	v.srv.TLS.Certificates = append(v.srv.TLS.Certificates, ca.Issue(t, names...))
	v.srv.StartTLS()
	t.Cleanup(v.srv.Close)
	_, port, _ := net.SplitHostPort(v.srv.Listener.Addr().String())
	v.port, _ = strconv.Atoi(port)
	return v
}

func hexSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func hexMAC(key, msg string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(msg))
	return hex.EncodeToString(mac.Sum(nil))
}

// verifySigV4 checks an AWS Signature Version 4 header signature, written
// from the specification for these tests: the canonical request is built
// from the request target exactly as received.
func verifySigV4(r *http.Request, body []byte, secret string) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("no SigV4 authorization")
	}
	parts := map[string]string{}
	for _, p := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		parts[k] = v
	}
	cred := strings.Split(parts["Credential"], "/") // id/date/region/service/aws4_request
	if len(cred) != 5 || cred[4] != "aws4_request" {
		return fmt.Errorf("bad credential scope")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload != "UNSIGNED-PAYLOAD" && payload != hexSHA(body) {
		return fmt.Errorf("payload hash differs")
	}
	path, query, _ := strings.Cut(r.RequestURI, "?")
	want := sigV4Signature(r.Method, specCanonicalURI(path, cred[3] == "s3"), specCanonicalQuery(query), r.Host, r.Header,
		strings.Split(parts["SignedHeaders"], ";"), payload, r.Header.Get("X-Amz-Date"), cred[1], cred[2], cred[3], secret)
	if !hmac.Equal([]byte(want), []byte(parts["Signature"])) {
		return fmt.Errorf("signature differs")
	}
	return nil
}

// specURIEncode is the specification's UriEncode.
func specURIEncode(s string, slash bool) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~", rune(c)), slash && c == '/':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// specCanonicalURI: S3 encodes the object key once and resolves
// nothing; other services normalize the path (RFC 3986 dot segments,
// no empty segments) and encode the path as received.
func specCanonicalURI(raw string, s3 bool) string {
	if s3 {
		dec, err := url.PathUnescape(raw)
		if err != nil {
			return "<bad escape>"
		}
		return specURIEncode(dec, true)
	}
	p := path.Clean("/" + raw)
	if strings.HasSuffix(raw, "/") && p != "/" {
		p += "/"
	}
	return specURIEncode(p, true)
}

// specCanonicalQuery: every name and value decoded ('+' is a plus
// sign), encoded, sorted by name then value.
func specCanonicalQuery(raw string) string {
	var pairs []string
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		dk, _ := url.PathUnescape(k)
		dv, _ := url.PathUnescape(v)
		pairs = append(pairs, specURIEncode(dk, false)+"="+specURIEncode(dv, false))
	}
	sort.Slice(pairs, func(i, j int) bool {
		ki, vi, _ := strings.Cut(pairs[i], "=")
		kj, vj, _ := strings.Cut(pairs[j], "=")
		return ki < kj || ki == kj && vi < vj
	})
	return strings.Join(pairs, "&")
}

func sigV4Signature(method, path, query string, host string, h http.Header, signed []string,
	payload, amzDate, date, region, service, secret string) string {
	var ch strings.Builder
	for _, name := range signed {
		val := strings.Join(h.Values(name), ",")
		if name == "host" {
			val = host
		}
		ch.WriteString(name + ":" + strings.TrimSpace(val) + "\n")
	}
	creq := strings.Join([]string{method, path, query, ch.String(), strings.Join(signed, ";"), payload}, "\n")
	scope := date + "/" + region + "/" + service + "/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hexSHA([]byte(creq))
	k := []byte("AWS4" + secret)
	for _, part := range []string{date, region, service, "aws4_request", sts} {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(part))
		k = mac.Sum(nil)
	}
	return hex.EncodeToString(k)
}

// The verifier itself, on the "get-vanilla" case of AWS's published
// SigV4 test suite.
func TestSigV4VerifierKnownVector(t *testing.T) {
	h := http.Header{"X-Amz-Date": {"20150830T123600Z"}}
	got := sigV4Signature("GET", "/", "", "example.amazonaws.com", h, []string{"host", "x-amz-date"},
		hexSHA(nil), "20150830T123600Z", "20150830", "us-east-1", "service", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	if got != "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31" {
		t.Fatalf("signature %s", got)
	}
}

// unlimited lifts the rate limits, for benchmarks on these fixtures.
func unlimited(c *Config) { c.Limits.PerHandleRPS, c.Limits.PerPluginRPS = 1e9, 1e9 }

// processorFixture is the standard fixture with processor intents bound
// to the file source, and a verifying upstream.
func processorFixture(t testing.TB, extra map[string]broker.Intent) (*fixture, *verifier) {
	t.Helper()
	ca := testenv.NewCA(t)
	v := startVerifier(t, ca, "sqs.us-east-1.amazonaws.com", "bucket.s3.eu-west-1.amazonaws.com", "sig.example.org")
	dests := []broker.Destination{{Host: "sig.example.org", Port: v.port}, {Host: "sqs.us-east-1.amazonaws.com", Port: v.port},
		{Host: "bucket.s3.eu-west-1.amazonaws.com", Port: v.port}}
	hmacRef := broker.SecretRef{Source: broker.SourceFile, Path: "demo/hmac", Field: "key"}
	awsRef := broker.SecretRef{Source: broker.SourceFile, Path: "demo/aws", Field: "secret_access_key"}
	awsTmpRef := broker.SecretRef{Source: broker.SourceFile, Path: "demo/aws-session", Field: "secret_access_key"}
	intents := map[string]broker.Intent{
		"sig.hmac": {Class: broker.ClassWrite, Secret: hmacRef, Destinations: dests,
			Inject: broker.Inject{Kind: &broker.HMACInject{Header: "X-Signature", Template: "sha256={{signature}}"}}},
		"sig.stripe": {Class: broker.ClassWrite, Secret: hmacRef, Destinations: dests,
			Inject: broker.Inject{Kind: &broker.HMACInject{Algorithm: "sha512", Encoding: "base64", Header: "X-Sig-512",
				Template: "t={{timestamp}},v1={{signature}}", Message: "{{method}}\n{{path}}\n{{timestamp}}\n{{body_sha256}}",
				TimestampHeader: "X-Timestamp"}}},
		"aws.explicit": {Class: broker.ClassWrite, Secret: awsRef, Destinations: dests,
			Inject: broker.Inject{Kind: &broker.SigV4Inject{Region: "eu-central-1", Service: "execute-api"}}},
		"aws.parsed":  {Class: broker.ClassWrite, Secret: awsRef, Destinations: dests, Inject: broker.Inject{Kind: &broker.SigV4Inject{}}},
		"aws.session": {Class: broker.ClassWrite, Secret: awsTmpRef, Destinations: dests, Inject: broker.Inject{Kind: &broker.SigV4Inject{}}},
		"aws.unsigned": {Class: broker.ClassWrite, Secret: awsRef, Destinations: dests,
			Inject: broker.Inject{Kind: &broker.SigV4Inject{UnsignedPayload: true}}},
		"aws.nokeyid": {Class: broker.ClassWrite, Secret: hmacRef, Destinations: dests, Inject: broker.Inject{Kind: &broker.SigV4Inject{}}},
	}
	for k, in := range extra {
		intents[k] = in
	}
	f := newFixtureWith(t, unlimited, fixtureOpts{ca: ca, intents: intents, secrets: fmt.Sprintf(
		"demo/hmac: {key: %q}\ndemo/aws: {access_key_id: %q, secret_access_key: %q}\n"+
			"demo/aws-session: {access_key_id: %q, secret_access_key: %q, session_token: %q}\n",
		hmacKey, awsKeyID, awsSecretKey, awsKeyID, awsSecretKey, awsSession)})
	f.writeSecret(t, testSecret)
	for _, n := range []string{"sig.example.org", "sqs.us-east-1.amazonaws.com", "bucket.s3.eu-west-1.amazonaws.com"} {
		f.res.set(n, "127.0.0.1")
	}
	return f, v
}

// issueFor mints a handle for intent valid for its binding's hosts.
func (f *fixture) issueFor(t testing.TB, intent string) string {
	t.Helper()
	in, _ := f.b.Intent(intent)
	iss, err := f.b.Issue(t.Context(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-" + intent, Intent: intent,
		Destinations: in.Destinations, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

func TestSigningProcessors(t *testing.T) {
	f, v := processorFixture(t, nil)
	sig := func(host, path string) string { return "http://" + host + ":" + strconv.Itoa(v.port) + path }
	for _, tc := range []struct {
		name, intent, method, url, body string
		header                          http.Header
		status                          int
		code                            string
		check                           func(t *testing.T, r *http.Request)
	}{
		{name: "hmac over the body, plugin's own signature replaced", intent: "sig.hmac", method: "POST",
			url: sig("sig.example.org", "/hmac/sha256/events"), body: `{"event":"paid"}`, header: http.Header{"X-Signature": {"forged"}}, status: 200},
		{name: "hmac sha512 base64, canonical string, timestamp header", intent: "sig.stripe", method: "PUT",
			url: sig("sig.example.org", "/hmac/stripe/items?b=2&a=1"), body: "payload", status: 200,
			check: func(t *testing.T, r *http.Request) {
				if ts, err := strconv.ParseInt(r.Header.Get("X-Timestamp"), 10, 64); err != nil || time.Since(time.Unix(ts, 0)) > time.Minute {
					t.Errorf("timestamp %q", r.Header.Get("X-Timestamp"))
				}
			}},
		{name: "sigv4, region and service from the binding, dummy signature replaced", intent: "aws.explicit", method: "POST",
			url: sig("sig.example.org", "/aws/items?b=2&a=1"), body: `{"n":1}`,
			header: http.Header{"Authorization": {"AWS4-HMAC-SHA256 Credential=DUMMY/20200101/x/y/aws4_request, SignedHeaders=host, Signature=00"},
				"X-Amz-Date": {"20200101T000000Z"}, "Content-Type": {"application/json"}}, status: 200,
			check: func(t *testing.T, r *http.Request) {
				if a := r.Header.Get("Authorization"); !strings.Contains(a, "Credential="+awsKeyID+"/") || !strings.Contains(a, "/eu-central-1/execute-api/") ||
					!strings.Contains(a, "content-type") {
					t.Errorf("authorization %q", a)
				}
			}},
		{name: "sigv4, service and region parsed from the host", intent: "aws.parsed", method: "GET",
			url: sig("sqs.us-east-1.amazonaws.com", "/aws/queue"), status: 200,
			check: func(t *testing.T, r *http.Request) {
				if a := r.Header.Get("Authorization"); !strings.Contains(a, "/us-east-1/sqs/aws4_request") {
					t.Errorf("authorization %q", a)
				}
			}},
		{name: "sigv4 for a virtual-hosted S3 bucket, unsigned payload", intent: "aws.unsigned", method: "PUT",
			url: sig("bucket.s3.eu-west-1.amazonaws.com", "/aws/object.txt"), body: "object body", status: 200,
			check: func(t *testing.T, r *http.Request) {
				if a := r.Header.Get("Authorization"); !strings.Contains(a, "/eu-west-1/s3/") || r.Header.Get("X-Amz-Content-Sha256") != "UNSIGNED-PAYLOAD" {
					t.Errorf("authorization %q, payload %q", a, r.Header.Get("X-Amz-Content-Sha256"))
				}
			}},
		{name: "sigv4 with a session token", intent: "aws.session", method: "GET", url: sig("sqs.us-east-1.amazonaws.com", "/aws/q"), status: 200,
			check: func(t *testing.T, r *http.Request) {
				if r.Header.Get("X-Amz-Security-Token") != awsSession || !strings.Contains(r.Header.Get("Authorization"), "x-amz-security-token") {
					t.Errorf("session token not sent and signed: %v", r.Header)
				}
			}},
		{name: "sigv4 signs the path and query as sent, and sends them so", intent: "aws.parsed", method: "GET",
			url: sig("sqs.us-east-1.amazonaws.com", "/aws/a//b/../c/%2B+;?q=a;b&r=c+d&s=%2B&t=%7e&u"), status: 200,
			check: func(t *testing.T, r *http.Request) {
				if want := "/aws/a//b/../c/%2B+;?q=a;b&r=c+d&s=%2B&t=%7e&u"; r.RequestURI != want {
					t.Errorf("the upstream received %q, the client sent %q", r.RequestURI, want)
				}
			}},
		{name: "hmac signs the path and query as sent", intent: "sig.stripe", method: "PUT",
			url: sig("sig.example.org", "/hmac/stripe/a//b/../c?q=a;b&r=c+d"), body: "payload", status: 200},
		{name: "sigv4 refuses a presigned URL", intent: "aws.parsed", method: "GET",
			url: sig("sqs.us-east-1.amazonaws.com", "/aws/x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=alh_x%2F20200101"), status: 400, code: CodePresigned},
		{name: "sigv4 without region for a host that names none", intent: "aws.parsed", method: "GET",
			url: sig("sig.example.org", "/aws/x"), status: 502, code: CodeSigningFailed},
		{name: "sigv4 with a secret lacking the access key id", intent: "aws.nokeyid", method: "GET",
			url: sig("sqs.us-east-1.amazonaws.com", "/aws/x"), status: 502, code: CodeSecretInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := f.issueFor(t, tc.intent)
			hdr := tc.header.Clone()
			if hdr == nil {
				hdr = http.Header{}
			}
			code, errCode, body := do(t, f.client(h), tc.method, tc.url, hdr, tc.body)
			if code != tc.status || errCode != tc.code {
				t.Fatalf("status %d code %q, want %d %q: %s", code, errCode, tc.status, tc.code, body)
			}
			if tc.status != 200 {
				select {
				case r := <-v.seen:
					t.Fatalf("a request without its signature reached the upstream: %v", r.Header)
				default:
				}
				return
			}
			r := <-v.seen
			if tc.check != nil {
				tc.check(t, r)
			}
			for _, leak := range []string{hmacKey, awsSecretKey, awsSession, awsKeyID, base64.StdEncoding.EncodeToString([]byte(awsKeyID))[:20]} {
				if strings.Contains(body, leak) {
					t.Fatalf("the response carried a secret: %s", body)
				}
			}
		})
	}
	// An AWS SDK in the plugin, configured with the handle as its access
	// key id and any secret key, signs with that dummy key: the proxy
	// finds the handle in the Credential and signs again with the real one.
	h := f.issueFor(t, "aws.parsed")
	dummy := "AWS4-HMAC-SHA256 Credential=" + h + "/20200101/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123"
	code, errCode, body := do(t, f.client(""), "POST", sig("sqs.us-east-1.amazonaws.com", "/aws/sdk"),
		http.Header{"Authorization": {dummy}, "X-Amz-Date": {"20200101T000000Z"}}, "Action=SendMessage")
	if code != http.StatusOK || errCode != "" {
		t.Fatalf("an SDK-signed request: %d %q %s", code, errCode, body)
	}
	if r := <-v.seen; strings.Contains(r.Header.Get("Authorization"), h) {
		t.Fatal("the handle reached the upstream")
	}
	// The audit names the processor.
	if !strings.Contains(f.audit.String(), `"processor":"aws_sigv4"`) || !strings.Contains(f.audit.String(), `"processor":"hmac"`) {
		t.Fatalf("audit without processor names:\n%s", f.audit.String())
	}
}

func TestAWSServiceRegion(t *testing.T) {
	for host, want := range map[string]string{
		"sqs.us-east-1.amazonaws.com":             "sqs/us-east-1",
		"bedrock-runtime.us-west-2.amazonaws.com": "bedrock-runtime/us-west-2",
		"bucket.s3.eu-west-1.amazonaws.com":       "s3/eu-west-1",
		"s3.amazonaws.com":                        "s3/us-east-1",
		"my.bucket.s3.amazonaws.com":              "s3/us-east-1",
		"iam.amazonaws.com":                       "iam/us-east-1",
		"a.b.c.amazonaws.com":                     "",
		"amazonaws.com":                           "",
		"api.example.com":                         "",
	} {
		s, r, ok := awsServiceRegion(host)
		if got := map[bool]string{true: s + "/" + r, false: ""}[ok]; got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
