package policy

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// costLimit bounds what one `when` may cost at run time (CEL's cost
// units: about one per operation and per element a comprehension
// visits), so a large input cannot make a decision slow. A rule that
// exceeds it fails to evaluate.
const costLimit = 100_000

// The CEL variables a rule's `when` sees, by name and type. Object types
// are the Go structs of request.go (ext.NativeTypes), so a misspelt
// field is an error at load, not at the first call.
var (
	ruleVars = []cel.EnvOption{
		cel.Variable("principal", cel.ObjectType("policy.Principal")),
		cel.Variable("actor", cel.ObjectType("policy.Actor")),
		cel.Variable("plugin", cel.StringType),
		cel.Variable("kind", cel.StringType),
		cel.Variable("method", cel.StringType),
		cel.Variable("risk", cel.StringType),
		cel.Variable("side_effect", cel.StringType),
		cel.Variable("dry_run", cel.BoolType),
		cel.Variable("input", cel.DynType),
		cel.Variable("run", cel.ObjectType("policy.Run")),
		cel.Variable("grant", cel.ObjectType("policy.Grant")),
		cel.Variable("spent", cel.ObjectType("policy.Spent")),
		cel.Variable("now", cel.TimestampType),
	}
	// An actors rule's `when` sees only who asks and for whom.
	actorVars = []cel.EnvOption{
		cel.Variable("principal", cel.ObjectType("policy.Principal")),
		cel.Variable("actor", cel.ObjectType("policy.Actor")),
	}
)

var envs struct {
	once        sync.Once
	rule, actor *cel.Env
	err         error
}

// celEnvs are the two environments, built once: they hold no state a
// compile or an evaluation changes.
func celEnvs() (rule, actor *cel.Env, err error) {
	envs.once.Do(func() {
		base := []cel.EnvOption{
			ext.NativeTypes(ext.ParseStructTags(true),
				reflect.TypeFor[Principal](), reflect.TypeFor[Actor](), reflect.TypeFor[Run](),
				reflect.TypeFor[Grant](), reflect.TypeFor[Spend](), reflect.TypeFor[Spent]()),
			ext.Strings(),
		}
		envs.rule, envs.err = cel.NewEnv(append(append([]cel.EnvOption{}, base...), ruleVars...)...)
		if envs.err == nil {
			envs.actor, envs.err = cel.NewEnv(append(append([]cel.EnvOption{}, base...), actorVars...)...)
		}
	})
	return envs.rule, envs.actor, envs.err
}

// compileWhen compiles and type-checks one boolean expression. The error
// is CEL's message, which quotes the expression (the operator's text),
// never a request's value: there is none at load.
func compileWhen(env *cel.Env, expr string) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return nil, fmt.Errorf("must be a boolean expression, is %s", ast.OutputType())
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(costLimit))
}

// errNotBool: an expression that type-checked as bool produced another
// value (a dyn input compared in a way only known at run time).
var errNotBool = errors.New("when: not a boolean")

// evalWhen runs one compiled expression; any error, or a value that is
// not a boolean, is an error the caller turns into a fail-closed result.
func evalWhen(prg cel.Program, act interpreter.Activation) (bool, error) {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, errNotBool
	}
	return b, nil
}

// activation resolves the CEL variables of one request. It is built once
// per decision and shared by every rule's program.
type activation struct {
	r     *Request
	risk  string
	input any
	now   time.Time
}

func newActivation(r *Request) *activation {
	a := &activation{r: r, risk: riskName(r.Risk), input: r.Input, now: r.Now}
	if a.input == nil {
		a.input = map[string]any{}
	}
	if a.now.IsZero() {
		a.now = time.Now()
	}
	return a
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	r := a.r
	switch name {
	case "principal":
		return r.Principal, true
	case "actor":
		return r.Actor, true
	case "plugin":
		return r.Plugin, true
	case "kind":
		return r.Kind, true
	case "method":
		return r.Method, true
	case "risk":
		return a.risk, true
	case "side_effect":
		return r.SideEffect, true
	case "dry_run":
		return r.DryRun, true
	case "input":
		return a.input, true
	case "run":
		return r.Run, true
	case "grant":
		return r.Grant, true
	case "spent":
		return r.Spent, true
	case "now":
		return a.now, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// actorActivation resolves an actors rule's variables.
type actorActivation struct {
	p Principal
	a Actor
}

func (a actorActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "principal":
		return a.p, true
	case "actor":
		return a.a, true
	}
	return nil, false
}

func (a actorActivation) Parent() interpreter.Activation { return nil }
