package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/proxy"
)

const interceptCAUsage = `usage: airlock intercept-ca <status|stage|promote> [--config FILE]

The CA with which the egress proxy intercepts CONNECT (proxy.intercept).
Rotation takes two steps, because a plugin reads the CA bundle when it
starts:
  status   the signing CA, a staged next CA, and every CA plugins trust
  stage    create the next CA and add it to the bundle; the current one
           still signs. Then restart the plugins (they trust both).
  promote  the staged CA signs from now on (every replica within
           proxy.intercept.reload); the old one stays trusted until the
           next stage.
`

func cmdInterceptCA(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, interceptCAUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	action := args[0]
	if action != proxy.CAStatusAction && action != proxy.CAStageAction && action != proxy.CAPromoteAction {
		fmt.Fprintf(stderr, "airlock intercept-ca: unknown subcommand %q\n\n%s", action, interceptCAUsage)
		return errUsage
	}
	fs := newFlags("intercept-ca "+action, stderr)
	path := configFlag(fs)
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	st, err := daemon.InterceptCA(ctx, cfg, action, newLogger(cfg.Log, stderr))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store:   %s\nsigner:  %s  sha256 %s  until %s\n", st.Store, st.Signer.Subject, st.Signer.SHA256, st.Signer.NotAfter.Format(time.RFC3339))
	if st.Next != nil {
		fmt.Fprintf(stdout, "staged:  %s  sha256 %s  (run promote after the plugins have restarted)\n", st.Next.Subject, st.Next.SHA256)
	}
	for _, c := range st.Trusted {
		fmt.Fprintf(stdout, "trusted: %s  sha256 %s\n", c.Subject, c.SHA256)
	}
	return nil
}
