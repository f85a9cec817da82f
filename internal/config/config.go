package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/hostport"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/vault"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

// Version is the only config version this build reads.
const Version = "v1"

// Defaults.
const (
	DefaultAdminListen = "127.0.0.1:9464"
	DefaultLogFormat   = "auto"
	DefaultLogLevel    = "info"
	// MaxSize bounds the config file.
	MaxSize = 1 << 20
	// defaultKeyFile is the signing-key file, relative to state_dir, used
	// by the embedded defaults so that `airlock token mint` and a running
	// `airlock serve` share keys on one machine.
	defaultKeyFile = "signing-keys.pem"
)

// Config is the whole configuration file.
type Config struct {
	Version  string        `yaml:"version"`
	StateDir string        `yaml:"state_dir"`
	Log      Log           `yaml:"log"`
	Admin    Admin         `yaml:"admin"`
	Vault    vault.Config  `yaml:"vault"`
	Tokens   tokens.Config `yaml:"tokens"`
	Broker   broker.Config `yaml:"broker"`
	Proxy    proxy.Config  `yaml:"proxy"`
	Host     Host          `yaml:"host"`
	// Tracing exports OpenTelemetry spans (off unless tracing.endpoint
	// is set).
	Tracing tracing.Config `yaml:"tracing"`
	// Path is the file this config was loaded from ("" for the
	// embedded defaults): plugins never see it.
	Path string `yaml:"-"`
}

// Log configures log/slog output.
type Log struct {
	Format string `yaml:"format"` // auto (text on a terminal, else JSON) | json | text
	Level  string `yaml:"level"`  // debug | info | warn | error
}

// Admin configures the admin listener (health, metrics, JWKS).
type Admin struct {
	Listen string `yaml:"listen"`
}

// Default returns the embedded defaults: everything on loopback, signing
// keys in a file under the state directory.
func Default() *Config {
	c := &Config{Version: Version}
	c.applyDefaults()
	c.Tokens.Keys = tokens.KeysConfig{Source: tokens.SourceFile, Path: filepath.Join(c.StateDir, defaultKeyFile)}
	return c
}

// Load reads and strictly decodes path, then applies defaults. It does not
// validate: call Validate to get every problem at once.
func Load(path string) (*Config, error) {
	c, err := LoadAll(path)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// LoadAll is Load for check-config: when the file is YAML whose keys or
// types are wrong, it returns the config decoded from the rest (defaults
// applied) together with those problems, so that every later check runs
// in the same pass. The config is nil only when there is nothing to
// check (no file, not YAML, more than one document).
func LoadAll(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("config %s: larger than %d bytes", path, MaxSize)
	}
	c, err := ParseAll(data)
	if err != nil {
		err = fmt.Errorf("config %s: %w", path, err)
	}
	if c != nil {
		if c.Path, _ = filepath.Abs(path); c.Path == "" {
			c.Path = path
		}
	}
	return c, err
}

// Parse strictly decodes one YAML document and applies defaults.
func Parse(data []byte) (*Config, error) {
	c, err := ParseAll(data)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ParseAll is Parse that also returns the partly decoded config beside
// the errors of a document whose keys or types are wrong (see LoadAll).
func ParseAll(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := &Config{}
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config is empty")
		}
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, decodeError(err)
		}
		// yaml decoded everything else: keep it for the other checks.
		c.applyDefaults()
		return c, decodeError(err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("config holds more than one YAML document")
	}
	c.applyDefaults()
	return c, nil
}

// decodeError reports every strict-decoding problem, each with its line.
// yaml's messages name keys and types, not values, except for scalars that
// fail to convert; those are reworded so no value is echoed.
func decodeError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	errs := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		errs = append(errs, errors.New(redactScalar(e)))
	}
	return errors.Join(errs...)
}

// redactScalar turns `line 3: cannot unmarshal !!str `secret` into int`
// into `line 3: cannot unmarshal !!str into int`.
func redactScalar(msg string) string {
	i := strings.Index(msg, " `")
	if i < 0 {
		return msg
	}
	j := strings.Index(msg[i+2:], "` ")
	if j < 0 {
		return msg
	}
	return msg[:i] + msg[i+2+j+1:]
}

func (c *Config) applyDefaults() {
	if c.StateDir == "" {
		c.StateDir = defaultStateDir()
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Admin.Listen == "" {
		c.Admin.Listen = DefaultAdminListen
	}
	if c.Host.Sandbox.Owner == "" {
		// A root host's plugins keep their uids across its restarts,
		// and differ from another host's: the state directory names it.
		if abs, err := filepath.Abs(c.StateDir); err == nil {
			c.Host.Sandbox.Owner = abs
		}
	}
	c.Tokens = c.Tokens.WithDefaults()
	c.Broker = c.Broker.WithDefaults()
	c.Proxy = c.Proxy.WithDefaults()
	c.Tracing = c.Tracing.WithDefaults()
	if c.Broker.EgressProxy == "" {
		// Plugins are told to use the proxy this process runs.
		c.Broker.EgressProxy = c.Proxy.Listen
	}
	if c.Broker.API.Socket == "" {
		c.Broker.API.Socket = filepath.Join(c.StateDir, "run", "broker.sock")
	}
	c.Broker.API = c.Broker.API.WithDefaults()
	h := &c.Host
	if h.PluginsDir == "" {
		h.PluginsDir = filepath.Join(c.StateDir, "plugins")
	}
	if h.Lockfile == "" {
		h.Lockfile = filepath.Join(c.StateDir, "plugins.lock.json")
	}
	if h.Evidence == "" {
		h.Evidence = filepath.Join(c.StateDir, "evidence.jsonl")
	}
	if h.Control == "" {
		h.Control = "unix:" + filepath.Join(c.StateDir, "run", "control.sock")
	}
	*h = h.WithControlDefaults()
	if h.Admin == "" {
		h.Admin = DefaultHostAdmin
	}
	if h.EvidenceKey == "" {
		h.EvidenceKey = filepath.Join(c.StateDir, "evidence-key.pem")
	}
	if h.CheckpointInterval == 0 {
		h.CheckpointInterval = DefaultCheckpointInterval
	}
	if h.StderrLevel == "" {
		h.StderrLevel = "info"
	}
	if h.Broker == "" {
		h.Broker = "unix:" + c.Broker.API.Socket
	}
	if h.Executa.JWKS == "" {
		h.Executa.JWKS = "http://" + c.Admin.Listen + tokens.JWKSPath
	}
	if h.Executa.Storage == "" {
		h.Executa.Storage = filepath.Join(c.StateDir, "aps.db")
	}
	if h.Executa.FilesDir == "" {
		h.Executa.FilesDir = filepath.Join(c.StateDir, "files")
	}
}

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "airlock")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "airlock")
	}
	// No home: the temp directory, a name per user (two users without a
	// home do not share one). It is refused when another user made it
	// first (fsutil.CheckPrivateDir).
	return filepath.Join(os.TempDir(), "airlock-state-"+strconv.Itoa(os.Geteuid()))
}

// Validate returns every problem in the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Version != Version {
		add("version: must be %q", Version)
	}
	switch c.Log.Format {
	case "auto", "json", "text":
	default:
		add("log.format: must be one of: auto, json, text")
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		add("log.level: %v", err)
	}
	if err := hostport.Listen(c.Admin.Listen); err != nil {
		add("admin.listen: %v", err)
	}
	if err := c.Vault.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Tokens.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Tokens.Keys.Source == tokens.SourceVault && !c.Vault.Configured() {
		add("tokens.keys.source: vault needs the vault section (vault.address)")
	}
	if err := c.Broker.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Proxy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Host.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Tracing.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Proxy.Limits.Scope == proxy.LimitsGlobal && c.Broker.Store.Type != broker.StoreRedis {
		add("proxy.limits.scope: global needs broker.store.type redis (the replicas share their rates there)")
	}
	errs = append(errs, c.checkIntentReferences()...)
	if !c.Vault.Configured() {
		for _, name := range c.Broker.IntentNames() {
			if c.Broker.Intents[name].Secret.Source == broker.SourceVault {
				add("broker.intents.%s.secret.source: vault needs the vault section (vault.address)", name)
			}
		}
	}
	return errors.Join(errs...)
}

// ParseLevel parses a log level name.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, errors.New("must be one of: debug, info, warn, error")
	}
	return l, nil
}
