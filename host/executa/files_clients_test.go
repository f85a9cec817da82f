package executa

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Stock clients inside the sandbox PUT to a presigned files URL with
// nothing but the environment the host gives them: HTTP_PROXY names the
// proxy and NO_PROXY the files endpoint's host without a port (curl and
// Python requests ignore an entry with one), so the PUT goes direct.
func TestPresignedPUTFromStockClients(t *testing.T) {
	f := newFixture(t)
	cs := newCompatServices(t, f)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is required (make tools installs it)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (make tools installs it)")
	}
	py := testenv.Python()
	clients := map[string]func(url string) []string{
		"curl": func(url string) []string {
			return []string{curl, "-sS", "--fail", "-o", "/dev/null", "-D", "-", "-X", "PUT", "--data-binary", "body", url}
		},
		"requests": func(url string) []string {
			return []string{py, "-c", "import requests,sys; r=requests.put(sys.argv[1], data=b'body', timeout=20); print(r.status_code); print('ETag: '+r.headers['ETag'])", url}
		},
		"urllib": func(url string) []string {
			return []string{py, "-c", "import urllib.request,sys; r=urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b'body', method='PUT'), timeout=20); print(r.status); print('ETag: '+r.headers['ETag'])", url}
		},
		"node": func(url string) []string {
			return []string{node, "-e", `const http=require("http"); const r=http.request(process.argv[1],{method:"PUT",agent:false},res=>{console.log(res.statusCode); console.log("ETag: "+res.headers.etag); res.resume(); res.on("end",()=>process.exit(0))}); r.end("body")`, url}
		},
	}
	levels := sandbox.Detect().Levels()
	for _, level := range levels {
		for name, argv := range clients {
			t.Run(string(level)+"/"+name, func(t *testing.T) {
				path := name + "-" + string(level) + ".txt"
				up, err := cs.files.Begin("user/u1", path, "", 4)
				if err != nil {
					t.Fatalf("upload_begin: %v", err)
				}
				args := argv(up.URL)
				var logs testenv.SyncBuffer
				p, err := launch.Start(context.Background(), launch.Request{Plugin: "files-client", Path: args[0], Args: args[1:],
					Direct: cs.files.DirectHosts()}, launch.Options{EgressProxy: f.proxy, Sandbox: sandbox.Config{Level: level},
					Log: slog.New(slog.NewTextHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				// A client that never ends must not hang the suite.
				stop := time.AfterFunc(2*time.Minute, p.Kill)
				defer stop.Stop()
				out, _ := io.ReadAll(p.Stdout())
				<-p.Exited()
				etag := ""
				for _, line := range strings.Split(string(out), "\n") {
					line = strings.TrimSpace(line)
					if len(line) > 6 && strings.EqualFold(line[:6], "etag: ") {
						etag = line[6:]
					}
				}
				if err := p.Err(); err != nil || etag == "" {
					t.Fatalf("PUT: %v\n%s\n%s", err, out, logs.String())
				}
				if _, err := cs.files.Complete("user/u1", path, etag); err != nil {
					t.Fatalf("complete: %v", err)
				}
			})
		}
	}
}
