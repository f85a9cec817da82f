package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/daemon"
)

const portsUsage = `usage: airlock ports install [--config FILE] [--yes] [--replace] SET
       airlock ports list [--config FILE]
       airlock ports show [--config FILE] NAME
       airlock ports remove [--config FILE] NAME

Ports are the numinance.ports.<name>.v<major> services plugin/v1 providers serve.
install reviews a descriptor set (protoc --include_imports --descriptor_set_out=SET,
or a buf image), prints every method with the risk class, execution mode, dry run
support, side effect and evidence the host will enforce, asks before installing
(--yes does not ask), keeps the set under the state directory and pins its
SHA-256 in the lockfile. A running airlock host installs it through its control
API and serves it at once. --replace installs over a port installed with another
digest. list shows the installed ports and whether each still has its digest;
show prints a port's review; remove stops serving an installed port.`

func cmdPorts(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, portsUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return errHelp
		}
		return errUsage
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("ports "+sub, stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, portsUsage) }
	path := configFlag(fs)
	yes := fs.Bool("yes", false, "install without asking")
	replace := fs.Bool("replace", false, "install over a port installed with another digest")
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return err
	}
	want := map[string]int{"install": 1, "list": 0, "show": 1, "remove": 1}
	n, ok := want[sub]
	if !ok || len(pos) != n {
		fs.Usage()
		return errUsage
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	switch sub {
	case "install":
		return portsInstall(ctx, cfg, pos[0], *yes, *replace, stdin, stdout)
	case "list":
		return portsList(cfg, stdout)
	case "show":
		return portsShow(cfg, pos[0], stdout)
	default:
		remote, err := daemon.RemovePort(ctx, cfg, pos[0])
		if err != nil {
			return err
		}
		how := ""
		if remote {
			how = ": the running airlock host no longer serves it"
		}
		_, err = fmt.Fprintf(stdout, "removed port %s%s\n", pos[0], how)
		return err
	}
}

// parseInterspersed parses flags before, between and after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

func portsInstall(ctx context.Context, cfg *config.Config, file string, yes, replace bool, stdin io.Reader, stdout io.Writer) error {
	set, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	pf, err := pluginv1.ParsePortSet(set, daemon.Ports().Compiled)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "port %s, descriptor set sha256 %s\n", pf.Name, pf.SHA256)
	if err := printReview(stdout, pf.Methods); err != nil {
		return err
	}
	if !yes {
		fmt.Fprint(stdout, "the host will enforce these rules for every provider of this port; install it? [y/N] ")
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.TrimSpace(strings.ToLower(line)); a != "y" && a != "yes" {
			fmt.Fprintln(stdout)
			return fmt.Errorf("not installed (answer y, or pass --yes)")
		}
	}
	res, remote, err := daemon.InstallPort(ctx, cfg, set, replace)
	if err != nil {
		return err
	}
	how := "installed"
	if res.Replaced {
		how = "replaced"
	}
	when := ": airlock host serves it from its next start"
	if remote {
		when = ": the running airlock host serves it now"
	}
	_, err = fmt.Fprintf(stdout, "%s port %s (sha256 %.16s)%s\n", how, res.Name, res.SHA256, when)
	return err
}

// printReview prints a port's methods as the host will treat them.
func printReview(w io.Writer, methods []pluginv1.MethodReview) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tRISK\tMODE\tDRY RUN\tSIDE EFFECT\tEVIDENCE")
	for _, m := range methods {
		dry := "unsupported"
		if m.DryRunSupported {
			dry = "supported"
		}
		mode := strings.TrimPrefix(m.ExecutionMode, "EXECUTION_MODE_")
		if m.ServerStreaming {
			mode += " (server streaming)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Method, strings.TrimPrefix(m.RiskClass, "RISK_CLASS_"), mode, dry,
			strings.TrimPrefix(m.SideEffect, "SIDE_EFFECT_"), orDash(strings.Join(m.DeclaredEvidence, ", ")))
	}
	return tw.Flush()
}

func portsList(cfg *config.Config, stdout io.Writer) error {
	lf, err := pluginv1.ReadLockfile(cfg.Host.Lockfile)
	if err != nil {
		return err
	}
	compiled := daemon.Ports()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tSHA256\tINSTALLED\tSTATUS")
	for _, name := range compiled.Names() {
		fmt.Fprintf(tw, "%s\tcompiled\t-\t-\tok\n", name)
	}
	names := make([]string, 0, len(lf.Ports))
	for n := range lf.Ports {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		e := lf.Ports[name]
		status := "ok"
		if _, err := pluginv1.LoadPort(name, e, compiled.Compiled); err != nil {
			status = "refused: " + err.Error()
		}
		fmt.Fprintf(tw, "%s\tinstalled\t%s\t%s\t%s\n", name, e.SHA256[:min(16, len(e.SHA256))], e.InstalledAt.Format("2006-01-02T15:04:05Z"), status)
	}
	return tw.Flush()
}

func portsShow(cfg *config.Config, name string, stdout io.Writer) error {
	ports := daemon.Ports()
	if fd, ok := ports.Lookup(name); ok {
		methods, err := pluginv1.ReviewCompiled(fd)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "port %s, compiled into this airlock\n", name)
		return printReview(stdout, methods)
	}
	lf, err := pluginv1.ReadLockfile(cfg.Host.Lockfile)
	if err != nil {
		return err
	}
	e, ok := lf.Ports[name]
	if !ok {
		return fmt.Errorf("port %s: %w", name, pluginv1.ErrPortNotInstalled)
	}
	pf, err := pluginv1.LoadPort(name, e, ports.Compiled)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "port %s, installed %s from a descriptor set of sha256 %s\n", name, e.InstalledAt.Format("2006-01-02T15:04:05Z"), pf.SHA256)
	return printReview(stdout, pf.Methods)
}

// checkPorts lists the installed ports for check-config and warns of one
// the host would refuse at start. A warning, not a problem: the host
// starts and serves the others (check-config runs before it starts).
func checkPorts(cfg *config.Config, stdout io.Writer) {
	lf, err := pluginv1.ReadLockfile(cfg.Host.Lockfile)
	if err != nil {
		return // the lockfile's own problem is the host's to report
	}
	names := make([]string, 0, len(lf.Ports))
	for n := range lf.Ports {
		names = append(names, n)
	}
	slices.Sort(names)
	compiled := daemon.Ports()
	for _, name := range names {
		if _, err := pluginv1.LoadPort(name, lf.Ports[name], compiled.Compiled); err != nil {
			fmt.Fprintf(stdout, "ports: WARNING: %v: airlock host will not serve it\n", err)
			continue
		}
		fmt.Fprintf(stdout, "ports: %s installed (sha256 %.16s)\n", name, lf.Ports[name].SHA256)
	}
}

// printServedPorts adds the ports the running host serves to airlock
// plugins' table; a host that does not answer GET /v1/ports adds none.
func printServedPorts(ctx context.Context, ct controlTarget, stdout io.Writer) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ct.base+"/v1/ports", nil)
	if err != nil {
		return
	}
	resp, err := ct.client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var list struct {
		Ports []pluginv1.PortResult `json:"ports"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list) != nil || len(list.Ports) == 0 {
		return
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tSOURCE\tSHA256\tMETHODS\tREFUSED")
	for _, p := range list.Ports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", p.Name, p.Source, orDash(p.SHA256[:min(16, len(p.SHA256))]), len(p.Methods), orDash(p.Refused))
	}
	tw.Flush()
}
