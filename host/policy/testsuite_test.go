package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed example suite passes, every case of it.
func TestRunTestsExampleSuite(t *testing.T) {
	var out strings.Builder
	res, err := RunTests(filepath.Join("..", "..", "examples", "policy"), &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Passed < 8 || strings.Contains(out.String(), "FAIL") {
		t.Fatalf("%+v\n%s", res, out.String())
	}
	if !strings.Contains(out.String(), "PASS: ") || !strings.HasPrefix(res.Digest, "sha256:") {
		t.Fatalf("no summary or digest:\n%s", out.String())
	}
}

func writeSuite(t *testing.T, policy string, tests map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PolicyFile), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, body := range tests {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const suitePolicy = `version: v1
actors: [{principals: [agent], actors: ["user:*"]}]
rules:
  - name: approve-privileged
    effect: require_approval
    risk_classes: [privileged]
    approvals: {count: 2}
  - name: sup
    effect: allow
    when: input.project == "SUP"
`

// A case that does not get what it expects fails, says why, and counts.
func TestRunTestsReportsFailures(t *testing.T) {
	dir := writeSuite(t, suitePolicy, map[string]string{"a_test.yaml": `cases:
  - name: passes
    request: {input: {project: SUP}}
    expect: {effect: allow, rule: sup}
  - name: wrong effect
    request: {input: {project: FIN}}
    expect: {effect: allow}
  - name: wrong rule
    request: {input: {project: SUP}}
    expect: {effect: allow, rule: other}
  - name: wrong approvals
    request: {risk: privileged}
    expect: {effect: require_approval, approvals: 1}
  - name: wrong delegation
    request: {principal: {id: agent}, actor: {kind: service, id: x}}
    expect: {may_act_for: true}
  - name: right delegation
    request: {principal: {id: agent}, actor: {kind: user, id: x}}
    expect: {may_act_for: true}
`})
	var out strings.Builder
	res, err := RunTests(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed != 2 || res.Failed != 4 {
		t.Fatalf("%+v\n%s", res, out.String())
	}
	for _, want := range []string{
		"passes: PASS",
		"wrong effect: FAIL (got deny by default, want allow)",
		"wrong rule: FAIL (got allow by sup, want allow by other)",
		"wrong approvals: FAIL (got require_approval by approve-privileged (2 approvals), want require_approval (1 approvals))",
		"wrong delegation: FAIL (may_act_for false, want true)",
		"right delegation: PASS",
		"FAIL: 4/6",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A case that cannot be run is an error naming the file and the case;
// nothing runs.
func TestRunTestsMalformed(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       string
	}{
		{"no name", "cases: [{request: {}, expect: {effect: allow}}]", "cases[0]: malformed test case: name: required"},
		{"no expect", "cases: [{name: x, request: {}}]", "cases[0] (x): malformed test case: expect: required"},
		{"empty expect", "cases: [{name: x, expect: {}}]", "expect: needs effect or may_act_for"},
		{"bad effect", "cases: [{name: x, expect: {effect: permit}}]", "expect.effect: must be"},
		{"bad risk", "cases: [{name: x, request: {risk: scary}, expect: {effect: deny}}]", "request.risk: must be"},
		{"twice", "cases: [{name: x, expect: {effect: deny}}, {name: x, expect: {effect: deny}}]", "cases[1] (x): malformed test case: name: used twice"},
		{"approvals without require_approval", "cases: [{name: x, expect: {effect: deny, approvals: 2}}]", "expect.approvals"},
		{"no cases", "cases: []", "no cases"},
		{"unknown key", "cases: [{name: x, expect: {effect: deny}, reqest: {}}]", "reqest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeSuite(t, suitePolicy, map[string]string{"m_test.yaml": tt.body})
			var out strings.Builder
			_, err := RunTests(dir, &out)
			if err == nil || !strings.Contains(err.Error(), "m_test.yaml") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming m_test.yaml and %q", err, tt.want)
			}
			if tt.name != "unknown key" && !errors.Is(err, ErrMalformedCase) {
				t.Fatalf("not ErrMalformedCase: %v", err)
			}
			if out.Len() != 0 {
				t.Fatalf("cases ran before the suite was checked:\n%s", out.String())
			}
		})
	}
	if _, err := RunTests(writeSuite(t, suitePolicy, nil), &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "no *_test.yaml") {
		t.Fatalf("no test file: %v", err)
	}
	if _, err := RunTests(writeSuite(t, "version: v2\n", map[string]string{"a_test.yaml": "cases: [{name: x, expect: {effect: deny}}]"}),
		&strings.Builder{}); err == nil || !strings.Contains(err.Error(), "policy.version") {
		t.Fatalf("a bad policy: %v", err)
	}
}
