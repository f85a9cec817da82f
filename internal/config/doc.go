// Package config loads Airlock's one YAML configuration file
// (`version: v1`). Decoding is strict: an unknown key is an error with its
// line number. Validate reports every problem at once and never prints a
// secret value.
package config
