package control

import (
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/airlock-dev/airlock/host"
)

// ActorRef is who an invocation request says it is made for (its
// "actor" field): Kind is ActorUser or ActorService, ID 1–256 printable
// characters.
type ActorRef struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// Actor kinds a caller may state, and the kind of a call made for no one
// but its caller.
const (
	ActorUser      = "user"
	ActorService   = "service"
	ActorPrincipal = "principal"
)

// MaxActorID bounds a stated actor's id.
const MaxActorID = 256

// ActorCheck says whether principal p may act for the actor kind/id it
// states; the integrator wires the policy's answer.
type ActorCheck func(p host.Principal, kind, id string) bool

// SetActorCheck sets who may act for whom. Without one, a request that
// states an actor is refused 403 actor_not_allowed.
func (c *Handler) SetActorCheck(check ActorCheck) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.actorCheck = check
}

var (
	runIDPattern      = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	planDigestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// runContext validates the request's run context; the error names the
// field, never its value.
func (req InvocationRequest) runContext() (host.RunContext, error) {
	var errs []string
	if req.RunID != "" && !runIDPattern.MatchString(req.RunID) {
		errs = append(errs, "run_id must be 1–128 characters of A-Z a-z 0-9 . _ : -")
	}
	if req.ChangeID != "" && !runIDPattern.MatchString(req.ChangeID) {
		errs = append(errs, "change_id must be 1–128 characters of A-Z a-z 0-9 . _ : -")
	}
	if req.PlanDigest != "" && !planDigestPattern.MatchString(req.PlanDigest) {
		errs = append(errs, `plan_digest must be "sha256:" and 64 lowercase hex digits`)
	}
	if errs != nil {
		return host.RunContext{}, errors.New(strings.Join(errs, "; "))
	}
	return host.RunContext{RunID: req.RunID, ChangeID: req.ChangeID, PlanDigest: req.PlanDigest}, nil
}

// validActorID: 1–256 printable characters, no control characters.
func validActorID(id string) bool {
	if id == "" || len(id) > MaxActorID {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\uFFFD' })
}

// actor resolves the request's actor for caller: the one it states, when
// valid and allowed, else the caller itself. It writes the refusal.
func (c *Handler) actor(w http.ResponseWriter, caller host.Principal, a *ActorRef) (host.Actor, bool) {
	if a == nil {
		return host.Actor{Kind: ActorPrincipal, Principal: caller.ID}, true
	}
	if a.Kind != ActorUser && a.Kind != ActorService {
		writeError(w, http.StatusBadRequest, "bad_actor", "actor.kind must be \"user\" or \"service\"")
		return host.Actor{}, false
	}
	if !validActorID(a.ID) {
		writeError(w, http.StatusBadRequest, "bad_actor", "actor.id must be 1–256 printable characters")
		return host.Actor{}, false
	}
	c.mu.Lock()
	check := c.actorCheck
	c.mu.Unlock()
	if check == nil || !check(caller, a.Kind, a.ID) {
		writeError(w, http.StatusForbidden, "actor_not_allowed", "the caller may not act for the actor it states")
		return host.Actor{}, false
	}
	return host.Actor{Kind: a.Kind, Principal: a.ID}, true
}
