package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// PolicyFile is the policy a test directory holds; test files beside it
// end in TestFileSuffix.
const (
	PolicyFile     = "policy.yaml"
	TestFileSuffix = "_test.yaml"
)

// TestResult is what RunTests found.
type TestResult struct {
	Passed, Failed int
	// Digest is the digest of the policy the cases ran against.
	Digest string
}

// testFile is one *_test.yaml: a list of cases.
type testFile struct {
	Cases []testCase `yaml:"cases"`
}

type testCase struct {
	Name    string      `yaml:"name"`
	Request testRequest `yaml:"request"`
	Expect  *testExpect `yaml:"expect"`

	risk Risk // Request.Risk, parsed
}

// testRequest is a Request as a test file writes it (risk by name).
type testRequest struct {
	Principal struct {
		ID         string            `yaml:"id"`
		Method     string            `yaml:"method"`
		Attributes map[string]string `yaml:"attributes"`
	} `yaml:"principal"`
	Actor struct {
		Kind string `yaml:"kind"`
		ID   string `yaml:"id"`
	} `yaml:"actor"`
	Plugin     string `yaml:"plugin"`
	Kind       string `yaml:"kind"`
	Method     string `yaml:"method"`
	Risk       string `yaml:"risk"`
	SideEffect string `yaml:"side_effect"`
	DryRun     bool   `yaml:"dry_run"`
	Input      any    `yaml:"input"`
	Run        struct {
		RunID      string `yaml:"run_id"`
		ChangeID   string `yaml:"change_id"`
		PlanDigest string `yaml:"plan_digest"`
	} `yaml:"run"`
	Grant struct {
		ID          string    `yaml:"id"`
		Principal   string    `yaml:"principal"`
		Actor       string    `yaml:"actor"`
		Plugins     []string  `yaml:"plugins"`
		Methods     []string  `yaml:"methods"`
		RiskCeiling string    `yaml:"risk_ceiling"`
		Residency   []string  `yaml:"residency"`
		Uses        int64     `yaml:"uses"`
		NotAfter    time.Time `yaml:"not_after"`
	} `yaml:"grant"`
	Spent struct {
		Invocation testSpend `yaml:"invocation"`
		Run        testSpend `yaml:"run"`
		Grant      testSpend `yaml:"grant"`
	} `yaml:"spent"`
	Now time.Time `yaml:"now"`
}

type testSpend struct {
	Calls          int64 `yaml:"calls"`
	CostMicros     int64 `yaml:"cost_micros"`
	EgressRequests int64 `yaml:"egress_requests"`
	EgressBytes    int64 `yaml:"egress_bytes"`
	Tokens         int64 `yaml:"tokens"`
}

// testExpect is what a case expects: an effect, and optionally the rule
// that decides, the approvals it asks for, and whether the request's
// principal may state its actor (MayActFor).
type testExpect struct {
	Effect    string `yaml:"effect"`
	Rule      string `yaml:"rule"`
	Approvals int    `yaml:"approvals"`
	MayActFor *bool  `yaml:"may_act_for"`

	effect Effect // Effect, parsed
}

// RunTests loads dir/policy.yaml and runs every case of dir/*_test.yaml
// against it, in file and case order, writing one line per case (PASS or
// FAIL, with why) and a summary to w, as `opa test -v` does. The error
// is for what could not be run at all: the policy does not load, a test
// file does not decode, a case is malformed (ErrMalformedCase, naming the
// file and the case). A failing case is not an error: see Failed.
func RunTests(dir string, w io.Writer) (TestResult, error) {
	p, err := Load(filepath.Join(dir, PolicyFile))
	if err != nil {
		return TestResult{}, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+TestFileSuffix))
	if err != nil {
		return TestResult{}, err
	}
	slices.Sort(files)
	if len(files) == 0 {
		return TestResult{}, fmt.Errorf("policy test: no *%s file in the directory", TestFileSuffix)
	}
	type loaded struct {
		name  string
		cases []testCase
	}
	var suites []loaded
	for _, f := range files {
		cases, err := loadCases(f)
		if err != nil {
			return TestResult{}, err
		}
		suites = append(suites, loaded{filepath.Base(f), cases})
	}
	res := TestResult{Digest: p.Digest()}
	for _, s := range suites {
		fmt.Fprintf(w, "%s:\n", s.name)
		for _, c := range s.cases {
			if why := c.run(p); why != "" {
				res.Failed++
				fmt.Fprintf(w, "%s: FAIL (%s)\n", c.Name, why)
			} else {
				res.Passed++
				fmt.Fprintf(w, "%s: PASS\n", c.Name)
			}
		}
	}
	fmt.Fprintln(w, strings.Repeat("-", 80))
	total := res.Passed + res.Failed
	if res.Failed > 0 {
		fmt.Fprintf(w, "PASS: %d/%d\nFAIL: %d/%d\n", res.Passed, total, res.Failed, total)
	} else {
		fmt.Fprintf(w, "PASS: %d/%d\n", res.Passed, total)
	}
	fmt.Fprintf(w, "policy %s\n", p.Digest())
	return res, nil
}

// loadCases decodes one test file strictly and checks every case before
// any runs.
func loadCases(path string) ([]testCase, error) {
	name := filepath.Base(path)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy test: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var tf testFile
	if err := dec.Decode(&tf); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy test: %s: %w", name, err)
	}
	if len(tf.Cases) == 0 {
		return nil, fmt.Errorf("policy test: %s: %w: no cases", name, ErrMalformedCase)
	}
	seen := map[string]bool{}
	var errs []error
	for i := range tf.Cases {
		c := &tf.Cases[i]
		at := fmt.Sprintf("%s: cases[%d]%s", name, i, nameSuffix(c.Name))
		if err := c.check(seen); err != nil {
			errs = append(errs, fmt.Errorf("policy test: %s: %w: %w", at, ErrMalformedCase, err))
		}
	}
	return tf.Cases, errors.Join(errs...)
}

func (c *testCase) check(seen map[string]bool) error {
	switch {
	case c.Name == "":
		return errors.New("name: required")
	case seen[c.Name]:
		return errors.New("name: used twice")
	case c.Expect == nil:
		return errors.New("expect: required")
	}
	seen[c.Name] = true
	if c.Expect.Effect == "" && c.Expect.MayActFor == nil {
		return errors.New("expect: needs effect or may_act_for")
	}
	if c.Expect.Effect != "" {
		eff, ok := ParseEffect(c.Expect.Effect)
		if !ok {
			return errors.New("expect.effect: must be allow, deny or require_approval")
		}
		c.Expect.effect = eff
	}
	if c.Expect.Approvals != 0 && c.Expect.effect != RequireApproval {
		return errors.New("expect.approvals: only with effect require_approval")
	}
	risk := RiskUnspecified
	if c.Request.Risk != "" {
		var ok bool
		if risk, ok = ParseRisk(c.Request.Risk); !ok {
			return errors.New("request.risk: must be unspecified, read, low, write or privileged")
		}
	}
	c.risk = risk
	return nil
}

// run evaluates the case; "" is a pass, else why it failed.
func (c *testCase) run(p *Policy) string {
	r := c.Request.request(c.risk)
	var why []string
	if c.Expect.Effect != "" {
		d := p.Evaluate(r)
		if d.Effect != c.Expect.effect || c.Expect.Rule != "" && d.Rule != c.Expect.Rule ||
			c.Expect.Approvals != 0 && d.Approvals != c.Expect.Approvals {
			got := fmt.Sprintf("got %s by %s", d.Effect, d.Rule)
			want := "want " + c.Expect.Effect
			if c.Expect.Rule != "" {
				want += " by " + c.Expect.Rule
			}
			if d.Effect == RequireApproval || c.Expect.Approvals != 0 {
				got += fmt.Sprintf(" (%d approvals)", d.Approvals)
				want += fmt.Sprintf(" (%d approvals)", c.Expect.Approvals)
			}
			if len(d.Errors) > 0 {
				got += " (when failed to evaluate in " + strings.Join(d.Errors, ", ") + ")"
			}
			why = append(why, got+", "+want)
		}
	}
	if c.Expect.MayActFor != nil {
		if got := p.MayActFor(r.Principal, r.Actor.Kind, r.Actor.ID); got != *c.Expect.MayActFor {
			why = append(why, fmt.Sprintf("may_act_for %v, want %v", got, *c.Expect.MayActFor))
		}
	}
	return strings.Join(why, "; ")
}

func (t *testRequest) request(risk Risk) Request {
	return Request{
		Principal: Principal{ID: t.Principal.ID, Method: t.Principal.Method, Attributes: t.Principal.Attributes},
		Actor:     Actor{Kind: t.Actor.Kind, ID: t.Actor.ID},
		Plugin:    t.Plugin, Kind: t.Kind, Method: t.Method, Risk: risk, SideEffect: t.SideEffect, DryRun: t.DryRun,
		Input: t.Input,
		Run:   Run{RunID: t.Run.RunID, ChangeID: t.Run.ChangeID, PlanDigest: t.Run.PlanDigest},
		Grant: Grant{ID: t.Grant.ID, Principal: t.Grant.Principal, Actor: t.Grant.Actor, Plugins: t.Grant.Plugins,
			Methods: t.Grant.Methods, RiskCeiling: t.Grant.RiskCeiling, Residency: t.Grant.Residency,
			Uses: t.Grant.Uses, NotAfter: t.Grant.NotAfter},
		Spent: Spent{Invocation: Spend(t.Spent.Invocation), Run: Spend(t.Spent.Run), Grant: Spend(t.Spent.Grant)},
		Now:   t.Now,
	}
}
