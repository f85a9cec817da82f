package evidence

import (
	"io"
	"os"
)

// Writer is where a Log's records go: its file, unless WrapFile put
// something in front of it.
type Writer interface {
	io.Writer
	Sync() error
}

// WrapFile puts what wrap returns in front of the log's file: every later
// record is written and synced through it. It exists so that the host's
// fail-closed tests can give the log a full disk (writes to /dev/full)
// for chosen record types, across the package boundary; a wrapper must
// keep the bytes it is given unchanged. A wrapper with a
// Truncate(size int64) error method cuts a failed write back itself
// (tests use it to make the cut fail). The wrapper is put in front of
// every later segment's file too.
func (l *Log) WrapFile(wrap func(file *os.File) Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wrap = wrap
	l.w = wrap(l.f)
}
