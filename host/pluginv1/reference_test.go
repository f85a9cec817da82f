package pluginv1

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

func TestResolveReference(t *testing.T) {
	f := newHostFixture(t)
	dir := t.TempDir()
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	spec := make([]byte, 200<<10)
	rand.Read(spec)
	os.WriteFile(filepath.Join(dir, "spec.pdf"), spec, 0o600)
	os.WriteFile(filepath.Join(dir, "hostonly.txt"), []byte("host eyes only"), 0o600)
	os.WriteFile(filepath.Join(dir, "tampered.txt"), []byte("changed after the request was made"), 0o600)
	opts := f.opts
	opts.Artifacts = host.DirArtifacts{Dir: dir}
	ctx := context.Background()
	p, err := Launch(ctx, f.install(t, badBin, "resolve"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	out, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket", Deadline: time.Now().Add(30 * time.Second),
		Input: &ticketsv1.CreateTicketRequest{Attachments: []*pb.Reference{
			{Uri: "artifact://spec.pdf", Sha256: sum(spec), Size: int64(len(spec))},
			{Uri: "artifact://hostonly.txt", Sha256: sum([]byte("host eyes only")), HostOnly: true},
			{Uri: "artifact://tampered.txt", Sha256: sum([]byte("the original content"))},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ok:204800:4", "PermissionDenied", "FailedPrecondition", "forged:PermissionDenied"}
	if len(out.Diagnostics) != len(want) {
		t.Fatalf("diagnostics %v", out.Diagnostics)
	}
	for i, w := range want {
		if got := out.Diagnostics[i].Code; got != w {
			t.Errorf("[%d] = %s, want %s", i, got, w)
		}
	}
}

func TestDirArtifactsStaysInside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("outside"), 0o600)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("inside"), 0o600)
	if err := os.Symlink(outside, filepath.Join(dir, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	a := host.DirArtifacts{Dir: dir}
	rc, err := a.Open("artifact://ok.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "inside" {
		t.Fatalf("read %q", b)
	}
	for _, uri := range []string{"artifact://escape.txt", "artifact://../secret.txt", "artifact://missing", "file:///etc/passwd", "artifact://", "artifact://.."} {
		if rc, err := a.Open(uri); !errors.Is(err, host.ErrArtifactNotFound) {
			if rc != nil {
				rc.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrArtifactNotFound", uri, err)
		}
	}
}
