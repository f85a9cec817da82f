package pluginv1

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One case per handshake-line rule of plugin/v1; each testdata file is
// named after the case it covers.
func TestReadHandshakeLine(t *testing.T) {
	tests := []struct {
		file      string
		wantField string // "" = accepted
	}{
		{"valid.line", ""},
		{"sixth-field-empty.line", "line"},
		{"sixth-field.line", "line"},
		{"four-fields.line", "line"},
		{"core-2.line", "core-protocol-version"},
		{"app-0.line", "app-protocol-version"},
		{"app-not-number.line", "app-protocol-version"},
		{"app-leading-zero.line", "app-protocol-version"},
		{"network-tcp.line", "network-type"},
		{"relative-path.line", "network-addr"},
		{"dotdot-segment.line", "network-addr"},
		{"dot-segment.line", "network-addr"},
		{"empty-segment.line", "network-addr"},
		{"trailing-slash.line", "network-addr"},
		{"nonprintable.line", "network-addr"},
		{"path-104-bytes.line", "network-addr"},
		{"protocol-netrpc.line", "protocol"},
		{"over-1024.line", "line"},
		{"no-newline.line", "line"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".line"), func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "lines", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			raw, _ := os.ReadFile(f.Name())
			hl, err := ReadHandshakeLine(f)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if hl.AppVersion != 1 || hl.Socket != "/tmp/nump427867795/p.sock" {
					t.Fatalf("parsed %+v", hl)
				}
				return
			}
			var le *LineError
			if !errors.As(err, &le) || le.Field != tt.wantField {
				t.Fatalf("err = %v, want a LineError on field %q", err, tt.wantField)
			}
			// The error names the field, never the value.
			for _, part := range strings.Split(strings.TrimSpace(string(raw)), "|") {
				if len(part) > 4 && strings.Contains(err.Error(), part) {
					t.Fatalf("error %q echoes %q from the line", err, part)
				}
			}
		})
	}
}

func TestPathOf103BytesAccepted(t *testing.T) {
	p := "/" + strings.Repeat("a", 95) + "/p.sock" // 103 bytes
	if len(p) != 103 {
		t.Fatalf("len %d", len(p))
	}
	if _, err := ParseHandshakeLine("1|1|unix|" + p + "|grpc"); err != nil {
		t.Fatalf("103-byte path: %v", err)
	}
}

func FuzzParseHandshakeLine(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "lines", "*.line"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.TrimSuffix(string(b), "\n"))
	}
	f.Fuzz(func(t *testing.T, line string) {
		hl, err := ParseHandshakeLine(line)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error is not a LineError: %v", err)
			}
			return
		}
		if hl.AppVersion < 1 || !strings.HasPrefix(hl.Socket, "/") || len(hl.Socket) > 103 ||
			strings.Contains(hl.Socket, "//") || strings.Contains(hl.Socket, "/../") || strings.Count(line, "|") != 4 {
			t.Fatalf("accepted a bad line %q as %+v", line, hl)
		}
	})
}
