package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// group is a command made of subcommands (airlock handle issue|inspect|
// revoke): its usage is generated from the table, and every subcommand
// gets the same parsing, usage errors and shared flags (dial: the flags
// that say where the command connects, and the dialer they configure).
type group[D any] struct {
	name   string // "handle"
	subs   []subcommand[D]
	footer string // what the usage says after the subcommands
	dial   func(fs *flag.FlagSet) D
}

// subcommand is one row of a group's table.
type subcommand[D any] struct {
	name     string
	synopsis string // its arguments, for the usage: "--plugin P … | FINGERPRINT"
	summary  string
	// flags adds the subcommand's own flags and returns what runs once
	// they parse.
	flags func(fs *flag.FlagSet) func(ctx context.Context, c *call[D]) error
}

// call is what a subcommand runs with.
type call[D any] struct {
	fs             *flag.FlagSet
	stdout, stderr io.Writer
	dial           D
	name           string // "handle issue", for messages
}

// usageError prints msg and the subcommand's usage and returns errUsage.
func (c *call[D]) usageError(format string, args ...any) error {
	fmt.Fprintf(c.stderr, "airlock %s: %s\n\n", c.name, fmt.Sprintf(format, args...))
	c.fs.Usage()
	return errUsage
}

func (g *group[D]) usage() string {
	names := make([]string, len(g.subs))
	width := 0
	for i, s := range g.subs {
		names[i] = s.name
		width = max(width, len(s.name))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage: airlock %s <%s> [flags]\n\n", g.name, strings.Join(names, "|"))
	for _, s := range g.subs {
		fmt.Fprintf(&b, "  %-*s  %s\n  %-*s  %s\n", width, s.name, s.synopsis, width, "", s.summary)
	}
	b.WriteString("\n" + g.footer)
	return b.String()
}

// run parses args[0] as the subcommand and the rest as its flags.
func (g *group[D]) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, g.usage())
		return errUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, g.usage())
		return nil
	}
	for _, s := range g.subs {
		if s.name != args[0] {
			continue
		}
		c := &call[D]{fs: newFlags(g.name+" "+s.name, stderr), stdout: stdout, stderr: stderr, name: g.name + " " + s.name}
		c.fs.Usage = func() { fmt.Fprintln(stderr, g.usage()); c.fs.PrintDefaults() }
		c.dial = g.dial(c.fs)
		run := s.flags(c.fs)
		if err := parse(c.fs, args[1:]); err != nil {
			return err
		}
		return run(ctx, c)
	}
	fmt.Fprintf(stderr, "airlock %s: unknown subcommand %q\n\n%s\n", g.name, args[0], g.usage())
	return errUsage
}
