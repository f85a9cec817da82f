package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlock-dev/airlock/broker"
	hostcontrol "github.com/airlock-dev/airlock/host/control"
)

const grantsUsage = `usage: airlock grants <list|show|issue|revoke> [flags]

  list              every access grant the host's store keeps: live, expired and revoked
  show ID           one grant, with what was spent under it
  issue [flags]     issue a grant (operators only):
                      --principal P and/or --actor KIND:ID    who it is for
                      --plugin NAME… [--method NAME…] and/or --risk-ceiling read|low|write|privileged
                      --ttl D (at most 720h) or --not-after RFC3339
                      [--calls N] [--cost-micros N] [--egress-requests N] [--egress-bytes N] [--tokens N]
                      [--residency REGION…] [--plan-digest D] [--run-id R]
  revoke ID         revoke a grant on every replica (operators only); the host
                    cancels its calls in flight under it

Plugin and method names are exact, "*", or a prefix ending in "*". Each talks to
the control API of airlock host or airlock dev, as airlock plugins does; --json
prints the control API's JSON.`

const approvalsUsage = `usage: airlock approvals <list|show|approve|deny> [flags]

  list                  every approval: pending, granted, denied and expired
  show ID               one approval: the request it is bound to, who decided
  approve ID [--uses N] [--grant-ttl D]
                        approve (never your own request; only if eligible); on the vote
                        that grants it, --uses N above 1 turns it into an access grant for N
                        calls with the same request (at most what was asked), until
                        --grant-ttl from now or the approval's expiry
  deny ID               deny: one deny decides

Each talks to the control API of airlock host or airlock dev, as airlock
plugins does; --json prints the control API's JSON.`

func cmdGrants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, fs, control, asJSON, err := ledgerCommand("grants", grantsUsage, args, stdout, stderr)
	if sub == "" || err != nil {
		return err
	}
	var (
		principal, actor, risk, ttl, notAfter, planDigest, runID *string
		plugins, methods, residency                              multiFlag
		budget                                                   broker.Limits
	)
	if sub == "issue" {
		principal = fs.String("principal", "", "the principal the grant is for")
		actor = fs.String("actor", "", "KIND:ID the grant is for (user:alice)")
		fs.Var(&plugins, "plugin", "a plugin it covers (repeatable)")
		fs.Var(&methods, "method", "a method it covers (repeatable; default: every method of its plugins)")
		risk = fs.String("risk-ceiling", "", "the highest risk class it covers: read, low, write or privileged")
		ttl = fs.String("ttl", "", "how long it lives (a Go duration, at most 720h)")
		notAfter = fs.String("not-after", "", "when it ends (RFC 3339), instead of --ttl")
		fs.Int64Var(&budget.Calls, "calls", 0, "call budget of all its calls together (0: none)")
		fs.Int64Var(&budget.CostMicros, "cost-micros", 0, "cost budget, in micro-units (0: none)")
		fs.Int64Var(&budget.EgressRequests, "egress-requests", 0, "egress request budget (0: none)")
		fs.Int64Var(&budget.EgressBytes, "egress-bytes", 0, "egress byte budget (0: none)")
		fs.Int64Var(&budget.Tokens, "tokens", 0, "sampling token budget (0: none)")
		fs.Var(&residency, "residency", "a region its calls may reach (repeatable; default: no limit)")
		planDigest = fs.String("plan-digest", "", "bind it to this plan digest")
		runID = fs.String("run-id", "", "bind it to this run")
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	var method, path string
	var body any
	switch sub {
	case "list":
		method, path = http.MethodGet, "/v1/grants"
	case "show", "revoke":
		if fs.NArg() != 1 {
			fmt.Fprintf(stderr, "airlock grants %s: needs one grant ID\n\n", sub)
			fs.Usage()
			return errUsage
		}
		method, path = http.MethodGet, "/v1/grants/"+url.PathEscape(fs.Arg(0))
		if sub == "revoke" {
			method, path = http.MethodPost, path+"/revoke"
		}
	case "issue":
		req := hostcontrol.GrantRequest{Principal: *principal, Actor: *actor, Plugins: plugins, Methods: methods,
			RiskCeiling: *risk, TTL: *ttl, Budget: budget, Residency: residency, PlanDigest: *planDigest, RunID: *runID}
		if *notAfter != "" {
			t, err := time.Parse(time.RFC3339, *notAfter)
			if err != nil {
				return fmt.Errorf("--not-after: not an RFC 3339 time")
			}
			req.NotAfter = t
		}
		method, path, body = http.MethodPost, "/v1/grants", req
	}
	if sub != "show" && sub != "revoke" && fs.NArg() != 0 {
		fmt.Fprintf(stderr, "airlock grants %s: unexpected argument %q\n\n", sub, fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	var out struct {
		Grants  []hostcontrol.GrantView `json:"grants"`
		Grant   *hostcontrol.GrantView  `json:"grant"`
		Spent   *broker.Spend           `json:"spent"`
		WasLive *bool                   `json:"was_live"`
	}
	raw, err := controlCall(ctx, control, method, path, body, &out)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, raw)
	}
	switch sub {
	case "list":
		return grantTable(stdout, out.Grants)
	case "revoke":
		if out.WasLive != nil && !*out.WasLive {
			fmt.Fprintln(stdout, "(the grant was revoked already)")
		}
	case "issue":
		fmt.Fprintf(stdout, "issued %s\n", out.Grant.ID)
	}
	if out.Grant != nil {
		printGrant(stdout, *out.Grant, out.Spent)
	}
	return nil
}

func cmdApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, fs, control, asJSON, err := ledgerCommand("approvals", approvalsUsage, args, stdout, stderr)
	if sub == "" || err != nil {
		return err
	}
	var uses *int
	var grantTTL *string
	if sub == "approve" {
		uses = fs.Int("uses", 0, "on the granting vote: turn the approval into an access grant for N similar calls")
		grantTTL = fs.String("grant-ttl", "", "how long that grant lives (default: until the approval's expiry)")
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	method, path := http.MethodGet, "/v1/approvals"
	var body any
	switch sub {
	case "list":
		if fs.NArg() != 0 {
			fmt.Fprintf(stderr, "airlock approvals list: unexpected argument %q\n\n", fs.Arg(0))
			fs.Usage()
			return errUsage
		}
	default:
		if fs.NArg() != 1 {
			fmt.Fprintf(stderr, "airlock approvals %s: needs one approval ID\n\n", sub)
			fs.Usage()
			return errUsage
		}
		path += "/" + url.PathEscape(fs.Arg(0))
		switch sub {
		case "approve":
			method, path, body = http.MethodPost, path+"/approve", hostcontrol.DecisionRequest{Uses: *uses, GrantTTL: *grantTTL}
		case "deny":
			method, path = http.MethodPost, path+"/deny"
		}
	}
	var out struct {
		Approvals []broker.Approval `json:"approvals"`
		Approval  *broker.Approval  `json:"approval"`
	}
	raw, err := controlCall(ctx, control, method, path, body, &out)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, raw)
	}
	if sub == "list" {
		return approvalTable(stdout, out.Approvals)
	}
	printApproval(stdout, *out.Approval)
	return nil
}

// ledgerCommand checks the subcommand and makes its flag set; sub is ""
// when the usage was all there was to do (or a usage error).
func ledgerCommand(name, usage string, args []string, stdout, stderr io.Writer) (string, *flag.FlagSet, func() (controlTarget, error), *bool, error) {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return "", nil, nil, nil, errUsage
	}
	subs := map[string][]string{"grants": {"list", "show", "issue", "revoke"}, "approvals": {"list", "show", "approve", "deny"}}[name]
	switch sub := args[0]; {
	case sub == "-h" || sub == "-help" || sub == "--help" || sub == "help":
		fmt.Fprintln(stdout, usage)
		return "", nil, nil, nil, nil
	case !slices.Contains(subs, sub):
		fmt.Fprintf(stderr, "airlock %s: unknown subcommand %q\n\n%s\n", name, sub, usage)
		return "", nil, nil, nil, errUsage
	}
	fs := newFlags(name+" "+args[0], stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	control := controlFlags(fs)
	asJSON := fs.Bool("json", false, "print the control API's JSON")
	return args[0], fs, control, asJSON, nil
}

// controlCall sends body (JSON, when not nil) to the control API and
// decodes a 2xx answer into out; it returns the answer's bytes.
func controlCall(ctx context.Context, control func() (controlTarget, error), method, path string, body, out any) ([]byte, error) {
	ct, err := control()
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, ct.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ct.client.Do(req)
	if err != nil {
		return nil, ct.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, refused(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, errors.New("the control API's answer is not the JSON expected")
	}
	return raw, nil
}

func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func grantTable(w io.Writer, gs []hostcontrol.GrantView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPRINCIPAL\tACTOR\tPLUGINS\tMETHODS\tRISK\tUSES\tNOT AFTER\tISSUED BY")
	for _, g := range gs {
		uses := "-"
		if g.Uses > 0 {
			uses = fmt.Sprint(g.Uses)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.State, orDash(g.Principal), orDash(g.Actor),
			orDash(strings.Join(g.Plugins, ",")), orDash(strings.Join(g.Methods, ",")), orDash(g.RiskCeiling), uses,
			g.NotAfter.UTC().Format(time.RFC3339), g.IssuedBy)
	}
	return tw.Flush()
}

func printGrant(w io.Writer, g hostcontrol.GrantView, spent *broker.Spend) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-15s %s\n", k+":", v)
		}
	}
	line("id", g.ID)
	line("state", g.State)
	line("principal", g.Principal)
	line("actor", g.Actor)
	line("plugins", strings.Join(g.Plugins, ", "))
	line("methods", strings.Join(g.Methods, ", "))
	line("risk ceiling", g.RiskCeiling)
	line("residency", strings.Join(g.Residency, ", "))
	line("run", g.RunID)
	line("plan digest", g.PlanDigest)
	line("request digest", g.RequestDigest)
	if g.Uses > 0 {
		line("uses", fmt.Sprint(g.Uses))
	}
	line("from approval", g.FromApproval)
	if !g.Budget.IsZero() {
		line("budget", spendLine(g.Budget))
	}
	if spent != nil {
		line("spent", orDash(spendLine(*spent)))
	}
	line("issued", g.IssuedAt.UTC().Format(time.RFC3339)+" by "+g.IssuedBy)
	line("not after", g.NotAfter.UTC().Format(time.RFC3339))
	if !g.RevokedAt.IsZero() {
		line("revoked", g.RevokedAt.UTC().Format(time.RFC3339)+" by "+g.RevokedBy)
	}
}

// spendLine names each dimension that is not zero.
func spendLine(s broker.Spend) string {
	var parts []string
	for _, d := range []struct {
		name string
		v    int64
	}{{"calls", s.Calls}, {"cost_micros", s.CostMicros}, {"egress_requests", s.EgressRequests},
		{"egress_bytes", s.EgressBytes}, {"tokens", s.Tokens}} {
		if d.v != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", d.name, d.v))
		}
	}
	return strings.Join(parts, ", ")
}

func approvalTable(w io.Writer, as []broker.Approval) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPLUGIN\tMETHOD\tREQUESTER\tACTOR\tAPPROVALS\tEXPIRES AT")
	for _, a := range as {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", a.ID, a.State, a.Plugin, a.Method, a.Requester, orDash(a.Actor),
			len(a.Approvers), a.Required, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func printApproval(w io.Writer, a broker.Approval) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-15s %s\n", k+":", v)
		}
	}
	line("id", a.ID)
	line("state", a.State)
	line("plugin", a.Plugin)
	line("method", a.Method)
	line("requester", a.Requester)
	line("actor", a.Actor)
	line("run", a.RunID)
	line("request digest", a.RequestDigest)
	line("rule", a.Rule)
	line("approvals", fmt.Sprintf("%d of %d: %s", len(a.Approvers), a.Required, orDash(strings.Join(a.Approvers, ", "))))
	line("eligible", strings.Join(a.Eligible, ", "))
	line("denied by", a.Denier)
	if a.Uses > 0 {
		line("uses", fmt.Sprint(a.Uses))
	}
	line("grant", a.GrantID)
	line("created", a.CreatedAt.UTC().Format(time.RFC3339))
	line("expires", a.ExpiresAt.UTC().Format(time.RFC3339))
}
