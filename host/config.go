package host

import (
	"errors"
	"strings"
)

// Config is the plugin host's configuration (the `host:` section). Paths
// default under the state directory.
type Config struct {
	PluginsDir string `yaml:"plugins_dir"`
	Lockfile   string `yaml:"lockfile"`
	Evidence   string `yaml:"evidence"`
	// Policy is a policy file; without one every action is denied.
	Policy string `yaml:"policy"`
	// Control is where the control API listens: host:port or unix:/path.
	Control string `yaml:"control"`
	// Broker is airlock serve's broker socket (unix:/path); default
	// broker.api.socket.
	Broker string `yaml:"broker"`
}

// DefaultControl is the control API's default listen address.
const DefaultControl = "127.0.0.1:9465"

// Validate returns every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Broker != "" && !strings.HasPrefix(c.Broker, "unix:/") {
		errs = append(errs, errors.New("host.broker: must be unix:/path (the broker API socket)"))
	}
	if c.Control == "" {
		errs = append(errs, errors.New("host.control: required"))
	}
	return errors.Join(errs...)
}
