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

// hangups delivers SIGHUP (refresh the secrets) until stop is called.
func hangups() (c <-chan os.Signal, stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
}

func buildLogger(c config.Log, w io.Writer) *slog.Logger {
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
