package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// botocorePython returns a python3 that imports botocore: Debian's
// python3-botocore (make tools installs it) or one on PATH.
func botocorePython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import botocore").Run() == nil {
			return py
		}
	}
	testenv.Missing(t, "python3 with botocore (Debian's python3-botocore)")
	return ""
}

// s3Upstream is a minimal S3: it accepts a request only with a SigV4
// signature it recomputes itself from the request target as received
// (verifySigV4), stores objects under the raw path, and records every
// request line.
type s3Upstream struct {
	srv     *httptest.Server
	port    int
	mu      sync.Mutex
	lines   []string // method and target of each request, as received
	objects map[string][]byte
	bad     []string // requests whose signature did not verify
}

func startS3(t *testing.T, ca *testenv.CA) *s3Upstream {
	t.Helper()
	s := &s3Upstream{objects: map[string][]byte{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
			// As S3 does (net/http sends 100 only for a body it reads).
			w.WriteHeader(http.StatusContinue)
		}
		body, _ := io.ReadAll(r.Body)
		path, _, _ := strings.Cut(r.RequestURI, "?")
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, r.Method+" "+r.RequestURI)
		if err := verifySigV4(r, body, awsSecretKey); err != nil {
			s.bad = append(s.bad, r.Method+" "+r.RequestURI+": "+err.Error())
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<Error><Code>SignatureDoesNotMatch</Code><Message>signature</Message></Error>`)
			return
		}
		switch {
		case r.Method == http.MethodPut:
			s.objects[path] = body
			w.Header().Set("ETag", `"`+hexSHA(body)[:32]+`"`)
		case r.URL.Query().Has("list-type"):
			w.Header().Set("Content-Type", "application/xml")
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`+
				`<Name>mybucket</Name><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`)
		default:
			b, ok := s.objects[path]
			if !ok {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `<Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
				return
			}
			_, _ = w.Write(b)
		}
	}))
	s.srv.TLS = tls12Config{}.config(ca, t)
	s.srv.TLS.Certificates = append(s.srv.TLS.Certificates, ca.Issue(t, "s3.eu-west-1.amazonaws.com"))
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	_, port, _ := net.SplitHostPort(s.srv.Listener.Addr().String())
	s.port, _ = strconv.Atoi(port)
	return s
}

// take returns and forgets the recorded request lines and bad signatures.
func (s *s3Upstream) take() (lines, bad []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, bad, s.lines, s.bad, s.objects = s.lines, s.bad, nil, nil, map[string][]byte{}
	return lines, bad
}

type botoCase struct {
	Op     string            `json:"op"`
	Key    string            `json:"key,omitempty"`
	Body   string            `json:"body"`
	Prefix string            `json:"prefix,omitempty"`
	Params map[string]string `json:"params,omitempty"`
}

type botoResult struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Error  string `json:"error"`
	Intact *bool  `json:"intact"`
}

// runBoto runs the cases with botocore and returns one result per case.
func runBoto(t *testing.T, py string, job map[string]any) []botoResult {
	t.Helper()
	b, _ := json.Marshal(job)
	out, err := exec.Command(py, filepath.Join("testdata", "botocore_s3.py"), string(b)).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("botocore: %v\n%s", err, stderr)
	}
	var res []botoResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("botocore output %q: %v", out, err)
	}
	return res
}

// The AWS SDK for Python, with the handle as its access key id, through
// both proxy modes, against an S3 that verifies every signature itself:
// object keys that look like paths ("//", ".."), escapes, '+', ';',
// unicode, query parameters with reserved characters, and empty bodies
// on one connection. First botocore talks to the S3 directly with the
// real key (proving the S3's verification agrees with botocore's
// signing), then through the proxy: the S3 must receive the very same
// request lines, each with a valid signature. Presigned URLs carry the
// handle in their query: they are refused, and nothing reaches the S3.
func TestBotocoreS3(t *testing.T) {
	py := botocorePython(t)
	ca := testenv.NewCA(t)
	s3 := startS3(t, ca)
	host := "s3.eu-west-1.amazonaws.com"
	dir := t.TempDir()
	caFile := filepath.Join(dir, "intercept-ca.pem")
	awsRef := broker.SecretRef{Source: broker.SourceFile, Path: "demo/aws", Field: "secret_access_key"}
	f := newFixtureWith(t, func(c *Config) {
		unlimited(c)
		c.Intercept = InterceptConfig{CAFile: caFile, CAKeyFile: filepath.Join(dir, "intercept-ca.key")}
	}, fixtureOpts{ca: ca, intents: map[string]broker.Intent{
		"aws.s3": {Class: broker.ClassWrite, Secret: awsRef, Inject: broker.Inject{Kind: &broker.SigV4Inject{}},
			Destinations: []broker.Destination{{Host: host, Port: s3.port, PathPrefix: "/mybucket/"}}},
	}, secrets: fmt.Sprintf("demo/aws: {access_key_id: %q, secret_access_key: %q}\n", awsKeyID, awsSecretKey)})
	f.res.set(host, "127.0.0.1")
	h := f.issueFor(t, "aws.s3")

	// urllib3 (under botocore) removes dot segments from an absolute-form
	// target itself before it reaches the proxy; keys with "." or ".."
	// segments are data only through CONNECT (TestPathSentAsIs has them
	// in absolute form, from a client that sends them).
	dotKeys := []string{"logs/../secret.txt", "./dot/./x"}
	keys := []string{"plain.txt", "a//w.txt", "a%2Bb.txt", "a+b c.txt", "semi;colon=x&y.txt",
		"ünïcødé/ключ/鍵.txt", "tilde~*'()!$@:,.txt", "trailing/", "//lead"}
	casesFor := func(keys []string) []botoCase {
		var cases []botoCase
		for _, k := range keys {
			cases = append(cases, botoCase{Op: "put", Key: k, Body: "body of " + k}, botoCase{Op: "get", Key: k, Body: "body of " + k})
		}
		return append(cases,
			botoCase{Op: "get", Key: "plain.txt", Body: "body of plain.txt",
				Params: map[string]string{"ResponseContentDisposition": `attachment; filename="a+b c;d.txt"`, "ResponseContentType": "text/plain; charset=utf-8"}},
			botoCase{Op: "list", Prefix: "dir/a;b+c d&e=f?g/é"},
			// botocore takes a final answer to Expect: 100-continue that
			// comes without a 100 for an early one, and its next put with
			// a body on that connection then stalls until its read timeout.
			botoCase{Op: "put", Key: "empty-1"}, botoCase{Op: "put", Key: "after-empty", Body: "x"},
			botoCase{Op: "put", Key: "empty-2"}, botoCase{Op: "put", Key: "empty-3"}, botoCase{Op: "put", Key: "after-empty", Body: "y"},
			botoCase{Op: "get", Key: "empty-2"})
	}

	job := func(endpoint, keyID, secret, ca string, proxies map[string]string, cases []botoCase) map[string]any {
		return map[string]any{"endpoint": endpoint, "key_id": keyID, "secret": secret, "ca": ca, "proxies": proxies,
			"region": "eu-west-1", "bucket": "mybucket", "read_timeout": 60, "cases": cases}
	}
	check := func(t *testing.T, res []botoResult, cases []botoCase) {
		t.Helper()
		if len(res) != len(cases) {
			t.Fatalf("%d results for %d cases", len(res), len(cases))
		}
		for i, r := range res {
			if r.Status != http.StatusOK || r.Error != "" || r.Intact != nil && !*r.Intact {
				t.Errorf("case %d %+v: status %d code %q error %q intact %v", i, cases[i], r.Status, r.Code, r.Error, r.Intact != nil && *r.Intact)
			}
		}
	}

	proxyURL := "http://x:" + h + "@" + f.addr
	for _, mode := range []struct {
		name, scheme, proxyKey, ca string
		keys                       []string
	}{
		{"absolute-form", "http", "http", ca.PEMFile, keys},
		{"CONNECT", "https", "https", caFile, append(dotKeys, keys...)},
	} {
		t.Run(mode.name, func(t *testing.T) {
			cases := casesFor(mode.keys)
			check(t, runBoto(t, py, job("https://127.0.0.1:"+strconv.Itoa(s3.port), awsKeyID, awsSecretKey, ca.PEMFile, nil, cases)), cases)
			want, bad := s3.take()
			if len(bad) > 0 {
				t.Fatalf("the S3's verification disagrees with botocore's signing: %q", bad)
			}
			endpoint := mode.scheme + "://" + host + ":" + strconv.Itoa(s3.port)
			check(t, runBoto(t, py, job(endpoint, h, "anything", mode.ca, map[string]string{mode.proxyKey: proxyURL}, cases)), cases)
			got, bad := s3.take()
			if len(bad) > 0 {
				t.Fatalf("requests signed by the proxy did not verify: %q", bad)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("the S3 received other request lines through the proxy than botocore sent directly:\ngot\n%s\nwant\n%s",
					strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			// Presigned URLs (SigV4 and SigV2) hold the handle in their
			// query: refused, nothing sent.
			pre := job(endpoint, h, "anything", mode.ca, map[string]string{mode.proxyKey: proxyURL},
				[]botoCase{{Op: "presign", Key: "plain.txt"}, {Op: "presign-v2", Key: "plain.txt"}})
			for i, r := range runBoto(t, py, pre) {
				if r.Status != http.StatusBadRequest || r.Code != CodePresigned {
					t.Errorf("presigned URL %d: %d %q %q", i, r.Status, r.Code, r.Error)
				}
			}
			if got, _ := s3.take(); len(got) > 0 {
				t.Fatalf("a presigned URL reached the S3: %q", got)
			}
		})
	}
	if strings.Contains(f.audit.String(), h) || strings.Contains(f.audit.String(), awsSecretKey) {
		t.Fatal("the audit log holds the handle or the secret")
	}
}
