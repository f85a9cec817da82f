package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ActionFacts are what a prepared action tells the decision point
// beyond its risk: the side effect its method declares ("" none) and its
// typed input as JSON (protojson for plugin/v1, the arguments for
// Executa).
type ActionFacts struct {
	SideEffect string
	InputJSON  []byte
}

// Describer is an Action that states its facts; both runtimes' actions
// are.
type Describer interface {
	Facts() ActionFacts
}

func factsOf(act Action) ActionFacts {
	if d, ok := act.(Describer); ok {
		return d.Facts()
	}
	return ActionFacts{}
}

// inputValue decodes an input for the request digest: numbers keep
// their text (json.Number), so two inputs that differ in a
// digit past float precision have different digests.
func inputValue(b []byte) map[string]any {
	m := map[string]any{}
	if len(bytes.TrimSpace(b)) == 0 {
		return m
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return map[string]any{}
	}
	return m
}

// RequestDigest is the digest an approval is bound to: the plugin,
// method, input (canonical JSON: keys sorted, numbers as sent), actor,
// dry run and plan digest of a call. A changed input, actor or plan is a
// different request.
func RequestDigest(plugin, method string, input map[string]any, actor string, dryRun bool, planDigest string) string {
	canon, _ := json.Marshal(map[string]any{"plugin": plugin, "method": method, "input": input, "actor": actor,
		"dry_run": dryRun, "plan_digest": planDigest})
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// actorString is an actor as grants and approvals name it: "kind:id".
func actorString(a Actor) string {
	if a == (Actor{}) {
		return ""
	}
	return a.Kind + ":" + a.Principal
}
