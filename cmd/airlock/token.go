package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/randid"
	"github.com/airlock-dev/airlock/tokens"
)

const tokenUsage = `usage: airlock token <mint|verify|rotate> [flags]

  mint    mint a sampling or storage token (for dev and testing)
  verify  read a token on stdin; print its claims, or the check that failed
  rotate  make a new active signing key in the configured key source
`

func cmdToken(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return errUsage
	}
	switch args[0] {
	case "mint":
		return cmdTokenMint(ctx, args[1:], stdout, stderr)
	case "verify":
		return cmdTokenVerify(ctx, args[1:], stdin, stdout, stderr)
	case "rotate":
		return cmdTokenRotate(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, tokenUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "airlock token: unknown subcommand %q\n\n%s", args[0], tokenUsage)
		return errUsage
	}
}

// kindAudience maps --kind to an audience.
func kindAudience(kind string) (string, error) {
	switch kind {
	case "sampling":
		return tokens.AudienceSampling, nil
	case "storage":
		return tokens.AudienceStorage, nil
	}
	return "", fmt.Errorf("--kind must be sampling or storage")
}

func cmdTokenMint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token mint", stderr)
	path := configFlag(fs)
	kind := fs.String("kind", "sampling", "sampling or storage")
	user := fs.String("user", "dev-user", "user_id claim")
	tool := fs.String("tool", "dev-tool", "executa_tool_id claim")
	invoke := fs.String("invoke", "", "tool_invoke_id claim (default: random UUID hex)")
	deadline := fs.Duration("deadline", time.Minute, "invocation deadline, from now")
	maxTokens := fs.Int("max-tokens-per-call", 8192, "sampling: negotiated maxTokensPerCall")
	maxCalls := fs.Int("max-calls-per-invoke", 8, "sampling: negotiated maxCallsPerInvoke")
	appID := fs.String("app-id", "", "storage: host-attested app_id (unlocks scope app)")
	appSlug := fs.String("app-slug", "", "storage: host-attested app_slug")
	if err := parse(fs, args); err != nil {
		return err
	}
	aud, err := kindAudience(*kind)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	if cfg.Tokens.Keys.Source == tokens.SourceMemory {
		log.Warn("key source is memory: this token verifies only against keys of this process, which ends now")
	}
	ring, err := daemon.RingForCLI(ctx, cfg, log)
	if err != nil {
		return err
	}
	if *invoke == "" {
		*invoke = randid.Hex(16)
	}
	b := tokens.Binding{UserID: *user, ExecutaToolID: *tool, ToolInvokeID: *invoke}
	dl := time.Now().Add(*deadline)
	iss := daemon.NewIssuer(cfg, ring)
	var tok string
	if aud == tokens.AudienceSampling {
		tok, _, err = iss.MintSampling(tokens.SamplingGrant{Binding: b, Deadline: dl, MaxTokensPerCall: *maxTokens, MaxCallsPerInvoke: *maxCalls})
	} else {
		tok, _, err = iss.MintStorage(tokens.StorageGrant{Binding: b, Deadline: dl, AppID: *appID, AppSlug: *appSlug})
	}
	if err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

func cmdTokenVerify(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("token verify", stderr)
	path := configFlag(fs)
	kind := fs.String("kind", "sampling", "required audience: sampling or storage")
	jwks := fs.String("jwks", "", "JWKS URL (default: the admin listener of the config's `airlock serve`)")
	if err := parse(fs, args); err != nil {
		return err
	}
	aud, err := kindAudience(*kind)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if *jwks == "" {
		*jwks = "http://" + cfg.Admin.Listen + tokens.JWKSPath
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 64<<10))
	if err != nil {
		return fmt.Errorf("read token from stdin: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return errors.New("no token on stdin")
	}
	keys := &tokens.JWKSClient{URL: *jwks, HTTPClient: &http.Client{Timeout: 10 * time.Second}}
	v, err := tokens.NewVerifier(keys, tokens.VerifierOptions{Issuer: cfg.Tokens.Issuer, Leeway: cfg.Tokens.Leeway, MaxLifetime: cfg.Tokens.TTL})
	if err != nil {
		return err
	}
	claims, err := v.Verify(ctx, tok, aud)
	if err != nil {
		return fmt.Errorf("token rejected: %w", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(claims)
}

func cmdTokenRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token rotate", stderr)
	path := configFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if cfg.Tokens.Keys.Source == tokens.SourceMemory {
		return errors.New("key source is memory: there is no shared key set to rotate; use tokens.rotate_every, or a file or vault key source")
	}
	log := newLogger(cfg.Log, stderr)
	ring, err := daemon.RingForCLI(ctx, cfg, log)
	if err != nil {
		return err
	}
	old := ring.Active()
	k, err := ring.Rotate(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "rotated: new kid %s (%s); previous kid %s verifies for %s more\n",
		k.ID, k.Algorithm, old.ID, cfg.Tokens.Retention())
	return err
}
