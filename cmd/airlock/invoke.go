package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	hostcontrol "github.com/airlock-dev/airlock/host/control"
)

func cmdInvoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("invoke", stderr)
	control := controlFlags(fs)
	dryRun := fs.Bool("dry-run", false, "ask for a dry run")
	timeout := fs.Duration("timeout", 60*time.Second, "invocation deadline, from now")
	appID := fs.String("app-id", "", "Executa: the App context to run in (its storage_token carries it; storage scope \"app\")")
	appSlug := fs.String("app-slug", "", "Executa: the App's slug, with --app-id")
	actor := fs.String("actor", "", "KIND:ID — who the call is made for (user:alice, service:billing), when the caller acts "+
		"for someone; the host's policy decides whether it may (default: the caller itself)")
	runID := fs.String("run-id", "", "the run the call belongs to (1-128 characters of A-Z a-z 0-9 . _ : -)")
	changeID := fs.String("change-id", "", "the change the call belongs to (as --run-id)")
	planDigest := fs.String("plan-digest", "", "the digest of the plan the call carries out (sha256:<64 lowercase hex>)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: airlock invoke [flags] PLUGIN METHOD [INPUT-JSON]

For a plugin/v1 provider, METHOD is numinance.ports.<name>.v<major>.<Service>/<Method> and
INPUT-JSON is the method's input in proto JSON:
  airlock invoke example.tickets numinance.ports.tickets.v1.Tickets/ListTickets '{"project":"demo"}'
For an Executa plugin, METHOD is a tool name from its manifest and INPUT-JSON the tool's
arguments object:
  airlock invoke executa-tickets summarize '{"base_url":"http://tickets.demo.airlock.test:8443"}'
The caller is who the control API authenticates (the unix socket's user, a client certificate,
a principal's token or a JWT in --control-token-file); --actor names whom it acts for, and
--run-id, --change-id and --plan-digest the run it belongs to (policy and evidence see them):
  airlock invoke --actor user:alice --run-id run-42 example.tickets numinance.ports.tickets.v1.Tickets/ListTickets
The outcome is printed with its result; a plugin's own failure exits 1 with status FAILED.`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 || fs.NArg() > 3 {
		fs.Usage()
		return errUsage
	}
	input := json.RawMessage("{}")
	if fs.NArg() == 3 {
		input = json.RawMessage(fs.Arg(2))
		if !json.Valid(input) {
			return fmt.Errorf("INPUT-JSON is not valid JSON")
		}
	}
	ireq := hostcontrol.InvocationRequest{Plugin: fs.Arg(0), Method: fs.Arg(1), Input: input, DryRun: *dryRun,
		Timeout: timeout.String(), AppID: *appID, AppSlug: *appSlug, RunID: *runID, ChangeID: *changeID, PlanDigest: *planDigest}
	if *actor != "" {
		kind, id, ok := strings.Cut(*actor, ":")
		if !ok || kind == "" || id == "" {
			return fmt.Errorf("--actor: must be KIND:ID (user:alice, service:billing)")
		}
		ireq.Actor = &hostcontrol.ActorRef{Kind: kind, ID: id}
	}
	body, _ := json.Marshal(ireq)
	ct, err := control()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ct.base+"/v1/invocations", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ct.client.Do(req)
	if err != nil {
		return ct.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return refused(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	status := ""
	for sc.Scan() {
		var ev hostcontrol.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("control API sent a line that is not an event")
		}
		switch ev.Event {
		case "running":
			fmt.Fprintln(stdout, "running…")
		case "outcome":
			status = ev.Status
			fmt.Fprintf(stdout, "invocation %s: %s\n", ev.InvocationID, strings.TrimPrefix(ev.Status, "STATUS_"))
			if ev.Reason != "" {
				fmt.Fprintf(stdout, "reason: %s\n", ev.Reason)
			}
			if len(ev.Result) > 0 {
				var pretty bytes.Buffer
				_ = json.Indent(&pretty, ev.Result, "", "  ")
				fmt.Fprintf(stdout, "result:\n%s\n", pretty.String())
			}
			for _, d := range ev.Diagnostics {
				fmt.Fprintf(stdout, "diagnostic: %s %s\n", d.Code, d.Message)
			}
			for _, id := range ev.EvidenceIDs {
				fmt.Fprintf(stdout, "evidence: %s\n", id)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if status != "STATUS_SUCCEEDED" {
		return fmt.Errorf("the invocation did not succeed (%s)", strings.TrimPrefix(status, "STATUS_"))
	}
	return nil
}
