package main

import (
	"fmt"
	"io"
)

func cmdCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check-config", stderr)
	path := configFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock check-config [--config FILE | FILE]\n\nValidates the config and reports every problem at once; no secret is printed.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return errUsage
	}
	if fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	if _, err := loadConfig(*path); err != nil {
		return err
	}
	name := *path
	if name == "" {
		name = "embedded defaults"
	}
	_, err := fmt.Fprintf(stdout, "%s: OK\n", name)
	return err
}
