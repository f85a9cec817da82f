package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/daemon"
)

// newLogger builds the process logger: JSON in production, text when
// stderr is a terminal (format auto), or as configured. go-redis's
// process-wide logger writes to it too.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	l := buildLogger(c, w)
	daemon.LogRedis(l)
	return l
}

// hangups delivers SIGHUP (a reload request: see daemon.Options.Reload)
// until stop is called.
func hangups() (c <-chan os.Signal, stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
}

func buildLogger(c config.Log, w io.Writer) *slog.Logger {
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
