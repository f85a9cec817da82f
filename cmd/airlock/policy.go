package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/host/policy"
)

const policyUsage = `usage: airlock policy test DIR
       airlock policy check FILE

test runs the cases of DIR/*_test.yaml against DIR/policy.yaml and prints
one line per case (PASS or FAIL) and a summary; it exits 1 if any case
fails or cannot be run. check loads a policy file as the host would (every
rule's CEL expression is type-checked) and prints its digest, the
ActionContext's profile_digest. See docs/policy.md.`

func cmdPolicy(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "test" && args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, policyUsage)
			return errHelp
		}
		fmt.Fprintln(stderr, policyUsage)
		return errUsage
	}
	sub := args[0]
	fs := newFlags("policy "+sub, stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, policyUsage) }
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	if sub == "check" {
		p, err := policy.Load(fs.Arg(0))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "OK %s (%d rules, %d actors rules)\n", p.Digest(), len(p.Rules), len(p.Actors))
		return err
	}
	res, err := policy.RunTests(fs.Arg(0), stdout)
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return errors.New("policy test: a case failed")
	}
	return nil
}
