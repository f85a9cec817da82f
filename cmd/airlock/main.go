// Command airlock is the single Airlock binary. It parses flags, loads
// the config and calls the library entry points (package daemon) that
// hold every lifecycle.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// stdio is a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one row of airlock's command table; usage is generated
// from it.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, s stdio) error
}

var commands = []command{
	{"dev", "run host, broker, proxy and token issuer in one process with a demo plugin",
		func(ctx context.Context, a []string, s stdio) error { return cmdDev(ctx, a, s.out, s.err) }},
	{"host", "run the installed plugins beside airlock serve; host install DIR installs one",
		func(ctx context.Context, a []string, s stdio) error { return cmdHost(ctx, a, s.out, s.err) }},
	{"invoke", "call a plugin method or Executa tool through the host's control API",
		func(ctx context.Context, a []string, s stdio) error { return cmdInvoke(ctx, a, s.out, s.err) }},
	{"mcp", "serve the host's MCP tools on stdin/stdout for a local agent (host.mcp)",
		func(ctx context.Context, a []string, s stdio) error { return cmdMCP(ctx, a, s.in, s.out, s.err) }},
	{"plugins", "list the host's plugins: kind, state, restarts, health, last failure",
		func(ctx context.Context, a []string, s stdio) error { return cmdPlugins(ctx, a, s.out, s.err) }},
	{"ports", "install, list, show or remove the ports (descriptor sets) plugins serve",
		func(ctx context.Context, a []string, s stdio) error { return cmdPorts(ctx, a, s.in, s.out, s.err) }},
	{"handle", "issue, inspect or revoke a credential handle over the broker API",
		func(ctx context.Context, a []string, s stdio) error { return cmdHandle(ctx, a, s.out, s.err) }},
	{"grants", "list, show, issue or revoke access grants through the host's control API",
		func(ctx context.Context, a []string, s stdio) error { return cmdGrants(ctx, a, s.out, s.err) }},
	{"approvals", "list, show, approve or deny calls waiting for approval",
		func(ctx context.Context, a []string, s stdio) error { return cmdApprovals(ctx, a, s.out, s.err) }},
	{"explain", "which proxy check would allow or deny a request, and why (nothing is sent)",
		func(ctx context.Context, a []string, s stdio) error { return cmdExplain(ctx, a, s.out, s.err) }},
	{"serve", "run the broker, egress proxy, token issuer, broker API and admin listener",
		func(ctx context.Context, a []string, s stdio) error { return cmdServe(ctx, a, s.err) }},
	{"check-config", "validate a config file and report every problem",
		func(ctx context.Context, a []string, s stdio) error { return cmdCheckConfig(ctx, a, s.out, s.err) }},
	{"policy", "test a policy against its cases (policy test DIR) or check a policy file",
		func(_ context.Context, a []string, s stdio) error { return cmdPolicy(a, s.out, s.err) }},
	{"token", "mint, verify or rotate Executa tokens (airlock token -h)",
		func(ctx context.Context, a []string, s stdio) error { return cmdToken(ctx, a, s.in, s.out, s.err) }},
	{"evidence", "verify (or repair) an evidence log: chain, exact encoding, signed checkpoints",
		func(ctx context.Context, a []string, s stdio) error { return cmdEvidence(ctx, a, s.out, s.err) }},
	{"intercept-ca", "show, stage or promote the proxy's CONNECT intercept CA (rotation)",
		func(ctx context.Context, a []string, s stdio) error { return cmdInterceptCA(ctx, a, s.out, s.err) }},
	{"version", "print version information",
		func(_ context.Context, a []string, s stdio) error { return cmdVersion(a, s.out, s.err) }},
}

// usage lists the commands of the table.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: airlock <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-13s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Every command takes --config FILE (or $AIRLOCK_CONFIG); without one the
embedded defaults are used. Run 'airlock <command> -h' for its flags.
`)
	return b.String()
}

// errUsage marks a command-line mistake: exit status 2.
var errUsage = errors.New("usage")

// errHelp: -h or --help asked for the usage, which is printed; exit 0.
var errHelp = errors.New("help")

func main() {
	// A re-executed airlock may be a plugin's sandbox init: it never
	// returns then.
	sandbox.Init()
	// A write to a closed stdout (`make run | tee`, then Ctrl-C ends tee
	// first) returns EPIPE instead of killing the process, so that it
	// still shuts down in order and writes its shutdown evidence. Notify,
	// not Ignore: an ignored signal would be inherited by every plugin.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return 0
	case "--version":
		name = "version"
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		fmt.Fprintf(stderr, "airlock: unknown command %q\n\n%s", args[0], usage())
		return 2
	}
	err := commands[i].run(ctx, args[1:], stdio{in: stdin, out: stdout, err: stderr})
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
}
