//go:build linux

package supervise

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/airlock-dev/airlock/internal/redact"
)

// MaxLine bounds one logged line; the rest of a longer line is dropped and
// the line marked clipped.
const MaxLine = 4096

// TailLines is how many of the last stderr lines a LineLog keeps for the
// status of a plugin that failed; TailLineMax bounds each of them.
const (
	TailLines   = 5
	TailLineMax = 200
)

// LineLog turns a plugin's stderr into log records: one record per line
// (not per Write), at the level the operator set, with credential-shaped
// values redacted. Safe for one writer; Flush after the last Write.
type LineLog struct {
	log      *slog.Logger
	level    slog.Level
	redactor *redact.Redactor

	mu      sync.Mutex
	buf     []byte
	clipped bool
	inKey   bool     // inside a PEM private key printed over several lines
	tail    []string // the last TailLines lines, redacted as logged
}

// NewLineLog logs each line as msg "plugin stderr" with attribute line.
// A nil redactor uses redact.Default.
func NewLineLog(log *slog.Logger, level slog.Level, r *redact.Redactor) *LineLog {
	if r == nil {
		r = redact.Default
	}
	return &LineLog{log: log, level: level, redactor: r}
}

// Write buffers b and logs every complete line.
func (l *LineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.append(b)
			break
		}
		l.append(b[:i])
		l.emit()
		b = b[i+1:]
	}
	return n, nil
}

func (l *LineLog) append(b []byte) {
	room := MaxLine - len(l.buf)
	if len(b) > room {
		b, l.clipped = b[:room], true
	}
	l.buf = append(l.buf, b...)
}

func (l *LineLog) emit() {
	line := string(bytes.TrimRight(l.buf, "\r"))
	// A PEM private key comes a line at a time: every line from its
	// BEGIN to its END is masked whole, not only the BEGIN line.
	begin, end := redact.PrivateKeyLine(line)
	switch {
	case l.inKey || begin:
		l.inKey = !end
		line = redact.Mask
	default:
		line = l.redactor.String(line)
	}
	l.keep(line)
	attrs := []slog.Attr{slog.String("line", line)}
	if l.clipped {
		attrs = append(attrs, slog.Bool("clipped", true))
	}
	l.log.LogAttrs(context.Background(), l.level, "plugin stderr", attrs...)
	l.buf, l.clipped = l.buf[:0], false
}

// keep adds a logged (so redacted) line to the tail.
func (l *LineLog) keep(line string) {
	if len(line) > TailLineMax {
		line = line[:TailLineMax] + "…"
	}
	if len(l.tail) == TailLines {
		l.tail = append(l.tail[:0], l.tail[1:]...)
	}
	l.tail = append(l.tail, line)
}

// Tail returns the last lines logged (at most TailLines, each cut at
// TailLineMax bytes), redacted as they were logged; oldest first.
func (l *LineLog) Tail() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.tail)
}

// Flush logs a final line that had no newline.
func (l *LineLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 || l.clipped {
		l.emit()
	}
}
