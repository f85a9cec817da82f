package main

import (
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
	return fs
}

// parse parses args; -h and bad flags become errUsage (already printed).
func parse(fs *flag.FlagSet, args []string) error {
	if fs.Parse(args) != nil {
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
