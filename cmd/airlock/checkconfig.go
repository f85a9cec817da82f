package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

const checkConfigUsage = `usage: airlock check-config [--serve | --host] [--vault] [--config FILE | FILE]

Validates the config and reports every problem at once, from every stage
(decoding, values and cross-references, files, sandbox, and with --vault
Vault), even when an earlier stage failed. No value of the config and no
secret is printed: each problem names its key.

--serve and --host check only the files that process opens, as the user
it runs as (the shipped units run each as its own user, and neither may
enter the other's state directory).
`

func cmdCheckConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check-config", stderr)
	path := configFlag(fs)
	checkSecrets := fs.Bool("vault", false, "also log in to Vault and check that every intent's secret and field can be read (values are never printed; a wrapped AppRole secret id is looked up, never unwrapped)")
	serveOnly := fs.Bool("serve", false, "check only airlock serve's files (its unit's ExecStartPre)")
	hostOnly := fs.Bool("host", false, "check only airlock host's files (its unit's ExecStartPre)")
	fs.Usage = func() {
		fmt.Fprint(stderr, checkConfigUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 || (*serveOnly && *hostOnly) {
		fs.Usage()
		return errUsage
	}
	if fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	scope := config.ScopeAll
	switch {
	case *serveOnly:
		scope = config.ScopeServe
	case *hostOnly:
		scope = config.ScopeHost
	}
	cfg := config.Default()
	var problems []error
	if *path != "" {
		var err error
		if cfg, err = config.LoadAll(*path); cfg == nil {
			return err
		} else if err != nil {
			problems = append(problems, err)
		}
	}
	// Every stage runs, whatever the ones before found.
	if err := cfg.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := cfg.CheckFilesOf(scope); err != nil {
		problems = append(problems, err)
	}
	if scope != config.ScopeServe {
		if err := checkSandbox(cfg, stdout); err != nil {
			problems = append(problems, err)
		}
		checkPorts(cfg, stdout)
	}
	if *checkSecrets {
		if scope == config.ScopeHost {
			fmt.Fprintln(stdout, "vault: not checked: airlock host does not use Vault (--host)")
		} else if err := checkVault(ctx, cfg, stdout, stderr); err != nil {
			problems = append(problems, err)
		}
	}
	name := *path
	if name == "" {
		name = "embedded defaults"
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid config:\n%w", errors.Join(problems...))
	}
	_, err := fmt.Fprintf(stdout, "%s: OK\n", name)
	return err
}

// checkSandbox says what this machine allows plugins, and what the config
// asks for.
func checkSandbox(cfg *config.Config, stdout io.Writer) error {
	fmt.Fprintf(stdout, "sandbox: %s\n", sandbox.Detect())
	want := cfg.Host.Sandbox.Level
	switch want {
	case "":
		want = sandbox.LevelAuto
	case sandbox.LevelAuto, sandbox.LevelNamespaces, sandbox.LevelLandlock, sandbox.LevelOff:
	default:
		return nil // an unknown level is a problem Validate reported
	}
	lv, err := sandbox.Resolve(want)
	if err != nil {
		return fmt.Errorf("host.sandbox.level: %w", err)
	}
	if lv == sandbox.LevelOff {
		fmt.Fprintln(stdout, "sandbox: WARNING: plugins run unconfined (host.sandbox.level: off)")
	}
	return nil
}
