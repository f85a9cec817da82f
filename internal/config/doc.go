// Package config loads Airlock's one YAML configuration file
// (`version: v1`). Decoding is strict: an unknown key is an error with its
// line number. Validate reports every problem at once and never prints a
// secret value.
//
// Each section is the Config of the component it configures (broker,
// proxy, tokens, Vault), except `host:` (Host): it configures the plugin
// host, both of its runtimes (host/pluginv1, host/executa), evidence,
// policy and the control API at once, so it lives here and the daemon
// turns it into each package's options.
package config
