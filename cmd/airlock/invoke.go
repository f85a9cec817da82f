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

	"github.com/airlock-dev/airlock/daemon"
	"github.com/airlock-dev/airlock/host"
)

// DefaultControl is where airlock dev serves the control API.
const DefaultControl = "http://127.0.0.1:9465"

func cmdInvoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("invoke", stderr)
	controlAddr := controlFlags(fs)
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
	body, _ := json.Marshal(host.InvocationRequest{Plugin: fs.Arg(0), Method: fs.Arg(1), Input: input, DryRun: *dryRun,
		Timeout: timeout.String(), AppID: *appID, AppSlug: *appSlug})
	control, err := controlAddr()
	if err != nil {
		return err
	}
	client, base := controlClient(control)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/invocations", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("control API at %s: %w (is airlock dev or airlock host running?)", control, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e map[string]string
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return fmt.Errorf("refused: %s: %s", e["error"], e["detail"])
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	status := ""
	for sc.Scan() {
		var ev host.Event
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
				fmt.Fprintf(stdout, "diagnostic: %s %s\n", d.GetCode(), d.GetMessage())
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

// controlClient returns a client and base URL for http://… or unix:/path.
func controlClient(addr string) (*http.Client, string) { return daemon.ControlClient(addr) }
