package main

import (
	"context"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", stderr)
	control := controlFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: airlock mcp [flags]

Serves the host's MCP tools on stdin/stdout, for an agent that starts its MCP servers as
commands: every call goes to the host's MCP endpoint (host.mcp.enabled) on the control API,
as the principal the control API authenticates — the unix socket's user, a client
certificate, or the token of --control-token-file (a principal's own token for an agent):
  airlock mcp --control-token-file /etc/airlock/agents/reviewer.token
Nothing but MCP is written to stdout; see docs/mcp.md.`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errUsage
	}
	ct, err := control()
	if err != nil {
		return err
	}
	local := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	if err := hostmcp.Bridge(ctx, local, ct.base+hostmcp.Path, ct.client, version); err != nil {
		return fmt.Errorf("airlock mcp: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
