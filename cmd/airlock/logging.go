package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/airlock-dev/airlock/internal/config"
)

// newLogger builds the process logger: JSON in production, text when
// stderr is a terminal (format auto), or as configured.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	level, _ := config.ParseLevel(c.Level) // validated already
	opts := &slog.HandlerOptions{Level: level}
	if logFormat(c, w) == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// logFormat is the format c gives the log on w: auto is text on a
// terminal, JSON otherwise.
func logFormat(c config.Log, w io.Writer) string {
	if c.Format != "auto" {
		return c.Format
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return "text"
		}
	}
	return "json"
}

// auditOut is where airlock serve writes its proxy audit lines directly,
// preformatted, beside the JSON log lines on w (both whole lines, each in
// one write, so they never interleave): w itself when the log is JSON;
// nil, for the logger's own formatting, when it is text.
func auditOut(c config.Log, w io.Writer) io.Writer {
	if logFormat(c, w) == "json" {
		return w
	}
	return nil
}
