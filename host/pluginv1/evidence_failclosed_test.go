package pluginv1

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/executa"
)

// diskFull sends the records of the chosen types to /dev/full, whose
// every write fails with ENOSPC as on a full file system; the others go
// to the log's file.
type diskFull struct {
	file, full *os.File
	mu         sync.Mutex
	types      []string
}

func (d *diskFull) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, typ := range d.types {
		if bytes.Contains(p, []byte(`"type":"`+typ+`"`)) {
			return d.full.Write(p)
		}
	}
	return d.file.Write(p)
}

func (d *diskFull) Sync() error { return d.file.Sync() }

func (d *diskFull) fail(types ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.types = types
}

// failRecords puts a diskFull in front of the log's file.
func failRecords(t *testing.T, l *evidence.Log) *diskFull {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { full.Close() })
	if _, err := full.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("/dev/full write: %v, want ENOSPC", err)
	}
	var d *diskFull
	l.WrapFile(func(f *os.File) evidence.Writer { d = &diskFull{file: f, full: full}; return d })
	return d
}

// A call whose evidence cannot be written is refused: nothing reaches the
// plugin or the upstream when the decision or start cannot be recorded,
// no handle reaches the plugin when its issuance cannot be, and a call
// whose outcome cannot be recorded is reported as such. The log still
// verifies: a failed write leaves nothing behind.
func TestEvidenceFailsClosed(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	disk := failRecords(t, f.opts.Evidence)

	for _, typ := range []string{"policy.decision", "invocation.start"} {
		t.Run(typ, func(t *testing.T) {
			disk.fail(typ)
			defer disk.fail()
			seen, issued := len(f.seenAuth), len(f.b.handles)
			out, err := invokeList(h, f.inst.Name)
			if !errors.Is(err, evidence.ErrUnavailable) || out != nil {
				t.Fatalf("invoke with %s unwritable: %+v %v", typ, out, err)
			}
			if len(f.seenAuth) != seen || len(f.b.handles) != issued {
				t.Fatal("a call whose record could not be written ran")
			}
		})
	}

	t.Run("credential.issued", func(t *testing.T) {
		disk.fail("credential.issued")
		defer disk.fail()
		seen := len(f.seenAuth)
		out, err := invokeList(h, f.inst.Name)
		if err != nil || out.Status == host.CallSucceeded {
			t.Fatalf("invoke with credential.issued unwritable: %+v %v", out, err)
		}
		if len(f.seenAuth) != seen {
			t.Fatal("the upstream was called with a handle whose issuance was not recorded")
		}
		f.b.mu.Lock()
		handle := f.b.handles[len(f.b.handles)-1]
		f.b.mu.Unlock()
		if _, err := f.b.Resolve(t.Context(), handle); !errors.Is(err, broker.ErrHandleRevoked) {
			t.Fatalf("the unrecorded handle: %v", err)
		}
	})

	t.Run("invocation.outcome", func(t *testing.T) {
		disk.fail("invocation.outcome")
		defer disk.fail()
		out, err := invokeList(h, f.inst.Name)
		if !errors.Is(err, evidence.ErrUnavailable) || out == nil || out.Status != host.CallSucceeded {
			t.Fatalf("invoke with invocation.outcome unwritable: %+v %v", out, err)
		}
		if !strings.Contains(err.Error(), out.InvocationID) {
			t.Fatalf("the error does not name the invocation that ran: %v", err)
		}
	})

	t.Run("Executa credential", func(t *testing.T) {
		if err := executa.Add(h, pyPlugin(t, "py"), roomy(executa.Options{})); err != nil {
			t.Fatal(err)
		}
		disk.fail("credential.issued")
		defer disk.fail()
		out, err := invokeTool(h, "py", "handle")
		if out != nil && out.Status == host.CallSucceeded {
			t.Fatalf("an Executa call got a handle whose issuance was not recorded: %+v %v", out, err)
		}
		if out == nil || !strings.Contains(out.Reason, evidence.ErrUnavailable.Error()) {
			t.Fatalf("Executa call: %+v %v", out, err)
		}
	})

	t.Run("fail open", func(t *testing.T) {
		disk.fail("policy.decision", "invocation.start", "credential.issued", "invocation.outcome")
		defer disk.fail()
		f.opts.Evidence.FailOpen = true
		defer func() { f.opts.Evidence.FailOpen = false }()
		out, err := invokeList(h, f.inst.Name)
		if err != nil || out.Status != host.CallSucceeded {
			t.Fatalf("fail open: %+v %v", out, err)
		}
	})

	fh, err := os.Open(f.evidence)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, _, err := evidence.Verify(fh); err != nil {
		t.Fatalf("the log after failed writes: %v", err)
	}
}
