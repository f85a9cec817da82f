package daemon

import (
	"bytes"
	stdlog "log"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// What a library writes to Go's standard logger (net/http's Transport
// quotes an unsolicited upstream response there) reaches the log as a
// count, never as its text.
func TestStandardLoggerWithheld(t *testing.T) {
	var buf bytes.Buffer
	LogRedis(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { stdlog.SetOutput(os.Stderr); stdlog.SetFlags(stdlog.LstdFlags) })
	stdlog.Printf("Unsolicited response received on idle HTTP channel starting with %q", "HTTP/1.1 200 OK\r\nX-Echo: Bearer sk-secret")
	if strings.Contains(buf.String(), "sk-secret") || !strings.Contains(buf.String(), "withheld") {
		t.Fatalf("the standard logger's line reached the log: %s", buf.String())
	}
}
