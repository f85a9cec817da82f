package main

import (
	"flag"
	"os"
)

// controlFlags adds --control and --config to a control API client
// command and returns the address to connect to: --control, else
// $AIRLOCK_CONTROL, else host.control of --config (or $AIRLOCK_CONFIG),
// else the default.
func controlFlags(fs *flag.FlagSet) func() (string, error) {
	path := configFlag(fs)
	control := fs.String("control", "", "control API: http://host:port or unix:/path (default: $AIRLOCK_CONTROL, else host.control of --config, else "+DefaultControl+")")
	return func() (string, error) {
		switch {
		case *control != "":
			return *control, nil
		case os.Getenv("AIRLOCK_CONTROL") != "":
			return os.Getenv("AIRLOCK_CONTROL"), nil
		case *path != "":
			cfg, err := loadConfig(*path)
			if err != nil {
				return "", err
			}
			return cfg.Host.Control, nil
		}
		return DefaultControl, nil
	}
}
