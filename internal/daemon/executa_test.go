package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/tokens"
)

// The files upload server ends with the Executa services' close, before
// their store closes: an upload in flight when close begins is finished,
// not cut, and close returns only once the server and the collector of
// abandoned uploads have ended (goleak in TestMain checks the rest).
func TestExecutaServicesCloseFinishesUploads(t *testing.T) {
	cfg := testConfig(t)
	cfg.Host.Executa.FilesListen = "127.0.0.1:0"
	cfg.Host.Executa.Plugins = []config.ExecutaPlugin{{Name: "x", Command: executaBin}}
	ring, err := tokens.NewRing(context.Background(), &tokens.MemorySource{}, tokens.RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	xs, err := startExecutaServices(context.Background(), cfg, hostDeps{keys: ring}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	files := xs.opts.Files
	up, err := files.Begin("user/u", "big.bin", "", 8)
	if err != nil {
		xs.close()
		t.Fatal(err)
	}
	// A body of unknown length goes chunked, each chunk flushed: the
	// server sees the first half before the test sends the rest.
	body, send := io.Pipe()
	req, _ := http.NewRequest(http.MethodPut, up.URL, body)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	if _, err := send.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	// The upload is in flight once its handler has written the first
	// half to its temporary file.
	for deadline := time.Now().Add(20 * time.Second); !halfWritten(cfg.Host.Executa.FilesDir); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upload's first half never reached the server")
		}
	}
	closed := make(chan struct{})
	go func() { xs.close(); close(closed) }()
	// Once the server has stopped accepting, close has begun; the upload
	// in flight then sends the rest of its bytes.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		c, err := net.Dial("tcp", files.DirectHosts()[0])
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the files server still accepts after close began")
		}
	}
	select {
	case <-closed:
		t.Fatal("close returned while an upload was in flight")
	default:
	}
	if _, err := send.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	send.Close()
	resp := <-answered
	if resp == nil {
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
		t.Fatalf("the upload in flight at close: %d", resp.StatusCode)
	}
	<-closed
}

// halfWritten says an upload's temporary file in dir holds 4 bytes.
func halfWritten(dir string) bool {
	tmp, _ := filepath.Glob(filepath.Join(dir, ".upload-*"))
	for _, p := range tmp {
		if st, err := os.Stat(p); err == nil && st.Size() >= 4 {
			return true
		}
	}
	return false
}
