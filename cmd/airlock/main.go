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
	"syscall"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

const usage = `usage: airlock <command> [flags]

commands:
  dev           run host, broker, proxy and token issuer in one process with a demo plugin
  host          run the installed plugins beside airlock serve; host install DIR installs one
  invoke        call a plugin method or Executa tool through the host's control API
  plugins       list the host's plugins: kind, state, restarts, health, last failure
  ports         install, list, show or remove the ports (descriptor sets) plugins serve
  handle        issue, inspect or revoke a credential handle over the broker API
  grants        list, show, issue or revoke access grants through the host's control API
  approvals     list, show, approve or deny calls waiting for approval
  explain       which proxy check would allow or deny a request, and why (nothing is sent)
  serve         run the broker, egress proxy, token issuer, broker API and admin listener
  check-config  validate a config file and report every problem
  policy        test a policy against its cases (policy test DIR) or check a policy file
  token         mint, verify or rotate Executa tokens (airlock token -h)
  evidence      verify (or repair) an evidence log: chain, exact encoding, signed checkpoints
  intercept-ca  show, stage or promote the proxy's CONNECT intercept CA (rotation)
  version       print version information

Every command takes --config FILE (or $AIRLOCK_CONFIG); without one the
embedded defaults are used. Run 'airlock <command> -h' for its flags.
`

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
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = cmdServe(ctx, rest, stderr)
	case "check-config":
		err = cmdCheckConfig(ctx, rest, stdout, stderr)
	case "policy":
		err = cmdPolicy(rest, stdout, stderr)
	case "token":
		err = cmdToken(ctx, rest, stdin, stdout, stderr)
	case "host":
		err = cmdHost(ctx, rest, stdout, stderr)
	case "invoke":
		err = cmdInvoke(ctx, rest, stdout, stderr)
	case "plugins":
		err = cmdPlugins(ctx, rest, stdout, stderr)
	case "ports":
		err = cmdPorts(ctx, rest, stdin, stdout, stderr)
	case "handle":
		err = cmdHandle(ctx, rest, stdout, stderr)
	case "grants":
		err = cmdGrants(ctx, rest, stdout, stderr)
	case "approvals":
		err = cmdApprovals(ctx, rest, stdout, stderr)
	case "explain":
		err = cmdExplain(ctx, rest, stdout, stderr)
	case "dev":
		err = cmdDev(ctx, rest, stdout, stderr)
	case "evidence":
		err = cmdEvidence(ctx, rest, stdout, stderr)
	case "intercept-ca":
		err = cmdInterceptCA(ctx, rest, stdout, stderr)
	case "version", "--version":
		err = cmdVersion(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "airlock: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
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
