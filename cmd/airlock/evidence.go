package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/host/evidence"
)

const evidenceUsage = `usage: airlock evidence verify [--jwks URL|FILE] [--head HASH|URL|FILE] FILE...
       airlock evidence repair FILE

verify checks an evidence log: every record is in the writer's exact encoding,
hashes and links to the one before. With --jwks (the host's
GET /v1/evidence/jwks.json, or a saved copy) every signed checkpoint is
checked, so a chain rewritten whole, a forged checkpoint or an empty log
fails. With --head, the log must hold that head: a record hash, or a
checkpoint (the host's GET /v1/evidence/head, or a saved copy) byte for
byte, so a truncated log, or one cut back to an older checkpoint, fails;
the output says which records the head covers and how many follow it.
Records after the last checkpoint are reported: no signature covers them.
Several files are the segments of a rotated log (evidence.jsonl.2
evidence.jsonl.1 evidence.jsonl, in any order): they are verified as one
chain, so a missing, altered or duplicated segment fails.

repair cuts the remains of failed writes out of a log the host does not
hold: an incomplete last record (a write that failed part-way and could
not be cut back, or a crash), and the parts of failed records an older
host left in front of the next record on a line. It appends an
evidence.repair record saying what was cut. A log that breaks in any
other way is not repaired.`

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

func cmdEvidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "repair" {
		return cmdEvidenceRepair(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, evidenceUsage)
		return errUsage
	}
	fs := newFlags("evidence verify", stderr)
	jwks := fs.String("jwks", "", "the checkpoint keys: a JWKS URL or file")
	head := fs.String("head", "", "the expected head: a hash, or a checkpoint URL or file")
	fs.Usage = func() { fmt.Fprintln(stderr, evidenceUsage); fs.PrintDefaults() }
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return errUsage
	}
	var opts evidence.VerifyOptions
	if *jwks != "" {
		b, err := fetchOrRead(ctx, *jwks)
		if err != nil {
			return fmt.Errorf("--jwks: %w", err)
		}
		if opts.Keys, err = evidence.ParseJWKS(b); err != nil {
			return fmt.Errorf("--jwks: %w", err)
		}
	}
	switch h := *head; {
	case h == "":
	case hexHash.MatchString(h):
		opts.HeadHash = h
	default:
		b, err := fetchOrRead(ctx, h)
		if err != nil {
			return fmt.Errorf("--head: %w", err)
		}
		var cp evidence.Checkpoint
		if err := json.Unmarshal(b, &cp); err != nil || cp.Sig == "" {
			return errors.New("--head: not a hash or a checkpoint")
		}
		opts.Head = &cp
	}
	v, err := evidence.VerifyFiles(fs.Args(), opts)
	if err != nil {
		var ve *evidence.VerifyError
		if errors.As(err, &ve) {
			return fmt.Errorf("evidence does not verify: %w (%d records verified before it)", err, v.Records)
		}
		return fmt.Errorf("evidence does not verify: %w", err)
	}
	printVerified(stdout, v, opts, fs.NArg())
	return nil
}

func cmdEvidenceRepair(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("evidence repair", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, evidenceUsage) }
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	res, err := evidence.Repair(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("evidence repair: %w", err)
	}
	if res.CutBytes == 0 {
		fmt.Fprintln(stdout, "OK: the log verifies; nothing to repair")
		return nil
	}
	where := "at the end"
	if len(res.Before) > 0 {
		seqs := make([]string, len(res.Before))
		for i, s := range res.Before {
			seqs[i] = strconv.FormatUint(s, 10)
		}
		where = "in front of records " + strings.Join(seqs, ", ") + ", and at the end if any"
	}
	fmt.Fprintf(stdout, "repaired: cut %d bytes of failed writes (%s); the log now ends with record %d, which records the cut (%s)\n",
		res.CutBytes, where, res.Record.Seq, evidence.RepairType)
	return nil
}

// printVerified says what was established, and what was not: what the
// saved head covers, and the records no signature covers yet.
func printVerified(w io.Writer, v evidence.Verified, opts evidence.VerifyOptions, files int) {
	verdict := fmt.Sprintf("OK: %d records, head %s", v.Records, v.Head)
	switch {
	case files > 1:
		verdict = fmt.Sprintf("OK: %d records (%d-%d) in %d files, head %s", v.Records, v.First, v.Seq, files, v.Head)
	case v.First > 1:
		// A later segment alone: what came before it is not checked.
		verdict = fmt.Sprintf("OK: %d records (%d-%d, a segment: records before %d are in earlier files), head %s", v.Records, v.First, v.Seq, v.First, v.Head)
	}
	if opts.Head != nil {
		// The verdict line shows the saved head's age: a replayed old
		// head verifies, and must be seen to be old at a glance.
		fmt.Fprintf(w, "%s; saved head signed %s (%s ago)\n", verdict,
			opts.Head.Time.UTC().Format(time.RFC3339), time.Since(opts.Head.Time).Round(time.Second))
	} else {
		fmt.Fprintln(w, verdict)
	}
	signed := "not checked: give --jwks"
	if opts.Keys != nil {
		signed = "checked"
	}
	if v.Last != nil {
		fmt.Fprintf(w, "checkpoints: %d (signatures %s); the last covers records 1-%d (head %s) at %s\n",
			v.Checkpoints, signed, v.Last.Seq, v.Last.Head, v.Last.Time.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "checkpoints: none")
	}
	switch {
	case opts.Head != nil:
		fmt.Fprintf(w, "saved head: covers records 1-%d (head %s, signed %s by %s); the log holds it as record %d, and %d records after it\n",
			opts.Head.Seq, opts.Head.Head, opts.Head.Time.Format(time.RFC3339), opts.Head.KeyID, v.HeadAt, int(v.Seq)-v.HeadAt)
	case opts.HeadHash != "":
		fmt.Fprintf(w, "saved head: record %d; the log holds %d records after it\n", v.HeadAt, int(v.Seq)-v.HeadAt)
	}
	if v.Unsigned > 0 {
		first := int(v.Seq) - v.Unsigned + 1
		fmt.Fprintf(w, "WARNING: %d records (%d-%d) follow the last checkpoint: linked, but no signature covers them yet\n",
			v.Unsigned, first, v.Seq)
	}
}

// fetchOrRead reads an http(s) URL or a file.
func fetchOrRead(ctx context.Context, src string) ([]byte, error) {
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		return os.ReadFile(src)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", src, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}
