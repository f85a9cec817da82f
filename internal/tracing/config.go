package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Defaults.
const (
	DefaultSampleRatio = 1.0
	DefaultQueueSize   = 2048
	// MaxQueueSize bounds the span queue (spans held in memory while the
	// exporter is slow).
	MaxQueueSize = 1 << 16
	// TracesPath is the OTLP/HTTP path spans are posted to when the
	// endpoint names no path.
	TracesPath = "/v1/traces"
)

// Config is the `tracing:` block. Tracing is on when Endpoint is set.
type Config struct {
	// Endpoint is the OTLP/HTTP receiver (a collector): an http or https
	// URL; with no path, spans go to /v1/traces under it. Empty: off.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces recorded, 0 to 1 (default
	// 1). A request that arrives with a traceparent follows its caller's
	// sampled flag instead.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// QueueSize is how many ended spans wait for the exporter at most
	// (default 2048); beyond it spans are dropped and counted.
	QueueSize int `yaml:"queue_size"`
}

// Enabled reports whether tracing is configured.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.SampleRatio == nil {
		r := DefaultSampleRatio
		c.SampleRatio = &r
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	return c
}

// Validate returns every problem of c at once; no message quotes a value.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Endpoint != "" {
		if _, err := tracesURL(c.Endpoint); err != nil {
			add("tracing.endpoint: %v", err)
		}
	}
	if r := c.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		add("tracing.sample_ratio: must be between 0 and 1")
	}
	if c.QueueSize < 0 || c.QueueSize > MaxQueueSize {
		add("tracing.queue_size: must be between 1 and %d", MaxQueueSize)
	}
	return errors.Join(errs...)
}

// tracesURL is the URL spans are posted to.
func tracesURL(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return nil, errors.New("must be an http or https URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http or https URL")
	case u.Host == "":
		return nil, errors.New("must name a host")
	case u.User != nil:
		return nil, errors.New("must not hold credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("must not have a query or fragment")
	}
	if strings.TrimSuffix(u.Path, "/") == "" {
		u.Path = TracesPath
	}
	return u, nil
}
