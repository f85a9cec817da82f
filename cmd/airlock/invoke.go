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
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: airlock invoke [flags] PLUGIN METHOD [INPUT-JSON]

For a plugin/v1 provider, METHOD is numinance.ports.<name>.v<major>.<Service>/<Method> and
INPUT-JSON is the method's input in proto JSON:
  airlock invoke example.tickets numinance.ports.tickets.v1.Tickets/ListTickets '{"project":"demo"}'
For an Executa plugin, METHOD is a tool name from its manifest and INPUT-JSON the tool's
arguments object:
  airlock invoke executa-tickets summarize '{"base_url":"http://tickets.demo.airlock.test:8443"}'
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
	body, _ := json.Marshal(hostcontrol.InvocationRequest{Plugin: fs.Arg(0), Method: fs.Arg(1), Input: input, DryRun: *dryRun,
		Timeout: timeout.String(), AppID: *appID, AppSlug: *appSlug})
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
