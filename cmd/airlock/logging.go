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
	format := c.Format
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
