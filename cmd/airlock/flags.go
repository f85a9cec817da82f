package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/airlock-dev/airlock/internal/config"
)

// newFlags returns a FlagSet that reports errors as errUsage.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("airlock "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// A command that says more sets its own; this one at least says how
	// to call it and where the rest is, never a bare "Usage of …".
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: airlock %s [flags]\n(airlock help lists every command)\n\nflags:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; -h becomes errHelp and bad flags errUsage (the usage
// is already printed either way).
func parse(fs *flag.FlagSet, args []string) error {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return errHelp
	case err != nil:
		return errUsage
	}
	return nil
}

// configFlag adds --config, defaulting to $AIRLOCK_CONFIG.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", os.Getenv("AIRLOCK_CONFIG"), "config file (default: embedded defaults)")
}

// loadConfig loads path (or the defaults) and validates it.
func loadConfig(path string) (*config.Config, error) {
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config:\n%w", err)
	}
	return cfg, nil
}
