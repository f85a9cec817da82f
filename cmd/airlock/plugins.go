package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/airlock-dev/airlock/host"
)

func cmdPlugins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "release" {
		return cmdPluginsRelease(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("plugins", stderr)
	control := controlFlags(fs)
	asJSON := fs.Bool("json", false, "print the control API's JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock plugins [--config FILE] [--control ADDR] [--control-token-file FILE] [--json]\n       airlock plugins release NAME\n\nLists the plugins of a running airlock host or airlock dev: kind, state, protocol version,\nrestarts, health, the last failure, a failed plugin's last stderr lines and a quarantine.\n`release NAME` lifts a quarantine a violation put on the plugin (an operator's act).")
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ct.base+"/v1/plugins", nil)
	if err != nil {
		return err
	}
	resp, err := ct.client.Do(req)
	if err != nil {
		return ct.unreachable(err)
	}
	defer resp.Body.Close()
	var list struct {
		Plugins []host.Status `json:"plugins"`
	}
	if resp.StatusCode != http.StatusOK {
		return refused(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil {
		return fmt.Errorf("control API sent no plugin list")
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tPROTOCOL\tPID\tSANDBOX\tRESTARTS\tHEALTH\tEGRESS\tLAST FAILURE")
	for _, p := range list.Plugins {
		pid := "-"
		if p.Pid != 0 {
			pid = fmt.Sprint(p.Pid)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Kind, p.State, orDash(p.Protocol), pid, orDash(p.Sandbox), p.Restarts,
			p.Health, orDash(p.Egress), orDash(strings.ReplaceAll(p.LastFailure, "\n", "; ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range list.Plugins {
		if q := p.Quarantined; q != nil {
			fmt.Fprintf(stdout, "\n%s is QUARANTINED since %s after invocation %s violated (%s): it serves no call until `airlock plugins release %s`\n",
				p.Name, q.At.Format("2006-01-02 15:04:05Z07:00"), q.Invocation, strings.Join(q.Kinds, ", "), p.Name)
		}
	}
	if !*asJSON {
		printServedPorts(ctx, ct, stdout)
	}
	// What a failed plugin last wrote to stderr (redacted by the host):
	// usually the reason in its own words.
	for _, p := range list.Plugins {
		if len(p.LastStderr) == 0 {
			continue
		}
		fmt.Fprintf(stdout, "\nlast stderr of %s:\n", p.Name)
		for _, l := range p.LastStderr {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdPluginsRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plugins release", stderr)
	control := controlFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock plugins release [--config FILE] [--control ADDR] NAME\n\nLifts the quarantine a violation put on plugin NAME: it serves calls again. Only an operator\n(host.control_operators) may; the release is recorded as evidence (plugin.released).")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	ct, err := control()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ct.base+"/v1/plugins/"+url.PathEscape(fs.Arg(0))+"/release", nil)
	if err != nil {
		return err
	}
	resp, err := ct.client.Do(req)
	if err != nil {
		return ct.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return refused(resp)
	}
	var out struct {
		Released bool `json:"released"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&out)
	if out.Released {
		fmt.Fprintf(stdout, "%s released: it serves calls again\n", fs.Arg(0))
	} else {
		fmt.Fprintf(stdout, "%s was not quarantined\n", fs.Arg(0))
	}
	return nil
}
