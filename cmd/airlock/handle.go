package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// brokerFlags adds --config, --broker and --broker-token-file and returns
// a dialer. The token file is the flag's, else the config's
// broker.api.token_file — or, with --broker and no config, broker.token
// beside that socket (where serve puts it by default).
// When socket is not nil, the dialer records there the socket it dials
// (see explainRefusal).
func brokerFlags(fs *flag.FlagSet, socket *string) func() (*brokerapi.Client, error) {
	path := configFlag(fs)
	addr := fs.String("broker", "", "the broker API socket (default: broker.api.socket of the config)")
	tokenFile := fs.String("broker-token-file", "", "the broker API token (default: broker.api.token_file of the config)")
	return func() (*brokerapi.Client, error) {
		target, tf := strings.TrimPrefix(*addr, "unix:"), *tokenFile
		if target == "" || tf == "" {
			if target != "" && *path == "" {
				tf = filepath.Join(filepath.Dir(target), broker.DefaultTokenFile)
			} else {
				cfg, err := loadConfig(*path)
				if err != nil {
					return nil, err
				}
				if target == "" {
					target = cfg.Broker.API.Socket
				}
				if tf == "" {
					tf = cfg.Broker.API.TokenFile
				}
			}
		}
		if socket != nil {
			*socket = target
		}
		return brokerapi.Dial("unix://"+target, brokerapi.DialOptions{TokenFile: tf})
	}
}

// explainRefusal replaces a failed call's error with the socket's own
// refusal when the socket refused this user by peer uid (the call saw a
// reset or a gRPC "error reading server preface"), naming the users it
// admits.
func explainRefusal(err error, what, socket string) error {
	if err == nil || socket == "" {
		return err
	}
	if why := peerauth.Refusal(socket); why != "" {
		return fmt.Errorf("%s at %s refused this user: %s", what, socket, why)
	}
	return err
}

func cmdHandle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var socket string
	err := handleCommands(&socket).run(ctx, args, stdout, stderr)
	if err == nil || errors.Is(err, errUsage) || errors.Is(err, errHelp) {
		return err
	}
	return explainRefusal(err, "broker API", socket)
}

// brokerDialer dials the broker API the command's flags name.
type brokerDialer = func() (*brokerapi.Client, error)

// handleCommands is airlock handle's table; the dialer records in socket
// the socket it dialed (see explainRefusal).
func handleCommands(socket *string) *group[brokerDialer] {
	return &group[brokerDialer]{
		name: "handle",
		dial: func(fs *flag.FlagSet) brokerDialer { return brokerFlags(fs, socket) },
		subs: []subcommand[brokerDialer]{
			{"issue", "--plugin P --invocation I --intent N [--dest URL]… [--ttl D] [--dry-run]",
				"mint a handle (printed once, with its fingerprint): to try an intent, or break-glass", handleIssue},
			{"inspect", "FINGERPRINT",
				"the grant behind a handle: plugin, invocation, intent, class, destinations, expiry, revoked", handleInspect},
			{"revoke", "--invocation I | --plugin P | FINGERPRINT",
				"revoke on every replica sharing the handle store", handleRevoke},
		},
		footer: `Each talks to airlock serve's broker API (broker.api.socket, or --broker unix:/path),
with the same authority as airlock host: an allowed uid and the token of
broker.api.token_file (or --broker-token-file). No secret is ever shown.`,
	}
}

func handleIssue(fs *flag.FlagSet) func(context.Context, *call[brokerDialer]) error {
	plugin := fs.String("plugin", "", "plugin id the handle is bound to (required)")
	inv := fs.String("invocation", "", "invocation id (required)")
	intent := fs.String("intent", "", "broker intent (required)")
	ttl := fs.Duration("ttl", 5*time.Minute, "lifetime (at most broker.max_handle_lifetime)")
	dryRun := fs.Bool("dry-run", false, "a dry-run handle (read-class intents only)")
	var dests multiFlag
	fs.Var(&dests, "dest", "a destination https://host[:port][/prefix] (repeatable; default: the intent's)")
	return func(ctx context.Context, c *call[brokerDialer]) error {
		var missing []string
		for _, f := range []struct {
			name string
			v    *string
		}{{"--plugin", plugin}, {"--invocation", inv}, {"--intent", intent}} {
			if *f.v == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return c.usageError("missing %s", strings.Join(missing, ", "))
		}
		if fs.NArg() != 0 {
			return c.usageError("unexpected argument %q", fs.Arg(0))
		}
		req := broker.IssueRequest{PluginID: *plugin, InvocationID: *inv, Intent: *intent, DryRun: *dryRun,
			Deadline: time.Now().Add(*ttl)}
		for _, d := range dests {
			p, err := broker.ParseDestination(d)
			if err != nil {
				return fmt.Errorf("--dest: %w", err)
			}
			req.Destinations = append(req.Destinations, p)
		}
		bc, err := c.dial()
		if err != nil {
			return err
		}
		defer bc.Close()
		iss, err := bc.Issue(ctx, req)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "handle:       %s\nfingerprint:  %s\nexpires at:   %s\negress proxy: %s\n(the handle is shown once; it is bearer material)\n",
			iss.Handle, iss.Fingerprint, iss.ExpiresAt.UTC().Format(time.RFC3339), iss.EgressProxy)
		return err
	}
}

func handleInspect(fs *flag.FlagSet) func(context.Context, *call[brokerDialer]) error {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, c *call[brokerDialer]) error {
		if fs.NArg() != 1 {
			return c.usageError("needs one FINGERPRINT")
		}
		bc, err := c.dial()
		if err != nil {
			return err
		}
		defer bc.Close()
		in, err := bc.Inspect(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		stdout := c.stdout
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			out := map[string]any{"grant": in.Grant, "revoked": in.Revoked, "expired": in.Expired}
			if in.Lease != nil {
				out["lease"] = in.Lease
			}
			return enc.Encode(out)
		}
		g := in.Grant
		state := "live"
		switch {
		case in.Revoked:
			state = "revoked"
		case in.Expired:
			state = "expired"
		}
		fmt.Fprintf(stdout, "fingerprint:  %s\nstate:        %s\nplugin:       %s\ninvocation:   %s\nintent:       %s (class %s)\nissued at:    %s\nexpires at:   %s\n",
			g.Fingerprint, state, g.PluginID, g.InvocationID, g.Intent, g.Class, g.IssuedAt.UTC().Format(time.RFC3339),
			g.ExpiresAt.UTC().Format(time.RFC3339))
		for _, d := range g.Destinations {
			fmt.Fprintf(stdout, "destination:  %s\n", d)
		}
		if l := in.Lease; l != nil {
			fmt.Fprintf(stdout, "lease:        %s\n", leaseLine(*l))
		}
		return nil
	}
}

func handleRevoke(fs *flag.FlagSet) func(context.Context, *call[brokerDialer]) error {
	inv := fs.String("invocation", "", "revoke every handle of this invocation")
	plugin := fs.String("plugin", "", "revoke every handle of this plugin")
	return func(ctx context.Context, c *call[brokerDialer]) error {
		n := 0
		for _, given := range []bool{*inv != "", *plugin != "", fs.NArg() == 1} {
			if given {
				n++
			}
		}
		if n != 1 || fs.NArg() > 1 {
			return c.usageError("needs exactly one of --invocation, --plugin or a FINGERPRINT")
		}
		bc, err := c.dial()
		if err != nil {
			return err
		}
		defer bc.Close()
		var revoked int
		switch {
		case *inv != "":
			revoked, err = bc.RevokeInvocation(ctx, *inv)
		case *plugin != "":
			revoked, err = bc.RevokePlugin(ctx, *plugin)
		default:
			revoked, err = bc.RevokeHandle(ctx, fs.Arg(0))
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "revoked %d live handle(s)\n", revoked)
		return err
	}
}

const explainUsage = `usage: airlock explain (--handle-fp FP | --intent N) METHOD URL

Which check of the egress proxy would allow or deny this request, and why —
the decision path, with nothing sent: the target, the intent's binding, the
declared destinations and methods, and the addresses the host resolves to.
URL is what the plugin sends: http://… (an absolute-form request; the proxy
adds TLS) or https://… (an intercepted CONNECT, when proxy.intercept is on:
the CONNECT's admission is explained first). A plugin pass's fingerprint
explains the CONNECT it opens; the request inside needs its own handle.`

func cmdExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("explain", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, explainUsage); fs.PrintDefaults() }
	dial := brokerFlags(fs, nil)
	fp := fs.String("handle-fp", "", "the handle's fingerprint (from evidence or the audit log)")
	intent := fs.String("intent", "", "an intent, as a handle issued with its own destinations")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 || (*fp == "") == (*intent == "") {
		fs.Usage()
		return errUsage
	}
	bc, err := dial()
	if err != nil {
		return err
	}
	defer bc.Close()
	ex, err := bc.Explain(ctx, *fp, *intent, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	for _, s := range ex.Steps {
		mark := "ok  "
		if !s.OK {
			mark = "DENY"
		}
		fmt.Fprintf(stdout, "%s %-12s %s\n", mark, s.Check, s.Detail)
	}
	if !ex.Allowed {
		fmt.Fprintf(stdout, "denied: %s\n", ex.Code)
		return errors.New("the proxy would refuse this request")
	}
	_, err = fmt.Fprintln(stdout, "allowed: the proxy would send it (rate limits and the secret are checked at request time)")
	return err
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// leaseLine describes the invocation's lease of a handle's intent: its
// state and fingerprint, never the lease id.
func leaseLine(l broker.LeaseState) string {
	if l.State == broker.LeaseStateNone {
		return "none (obtained at the invocation's first use)"
	}
	s := l.State
	if l.Fingerprint != "" {
		s += " lease_fp " + l.Fingerprint
	}
	if !l.ExpiresAt.IsZero() {
		s += ", expires at " + l.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if l.Renewable {
		s += ", renewable"
	}
	return s
}
