package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/airlock-dev/airlock/host"
)

func cmdEvidence(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: airlock evidence verify [--head HASH] FILE")
		return errUsage
	}
	fs := newFlags("evidence verify", stderr)
	head := fs.String("head", "", "the head hash recorded elsewhere; detects a truncated tail")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: airlock evidence verify [--head HASH] FILE")
		return errUsage
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	n, got, err := host.VerifyEvidence(f)
	if err != nil {
		var ve *host.VerifyError
		if errors.As(err, &ve) {
			return fmt.Errorf("evidence does not verify: %w (%d records verified before it)", err, n)
		}
		return err
	}
	if *head != "" && *head != got {
		return fmt.Errorf("evidence does not verify: head is %s, want %s (records were removed from the end)", got, *head)
	}
	_, err = fmt.Fprintf(stdout, "OK: %d records, head %s\n", n, got)
	return err
}
