package policy

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
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
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if iterates(ast) {
		opts = append(opts, cel.CostLimit(costLimit))
	}
	return env.Program(ast, opts...)
}

// iterates reports whether an expression holds a comprehension (exists,
// all, map, filter, …): only those make a decision's cost grow faster
// than the input, so only those pay for cost tracking, which would
// otherwise double the cost of every rule.
func iterates(ast *cel.Ast) bool {
	nav := celast.NavigateAST(ast.NativeRep())
	return len(celast.MatchDescendants(nav, celast.KindMatcher(celast.ComprehensionKind))) > 0
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
// per decision and shared by every rule's program; each variable is
// converted to a CEL value once, at its first use.
type activation struct {
	r       *Request
	adapter types.Adapter
	vals    [len(varNames)]ref.Val
}

// varNames are the rule variables, in the order activation caches them.
var varNames = [...]string{"principal", "actor", "plugin", "kind", "method", "risk", "side_effect", "dry_run", "input",
	"run", "grant", "spent", "now"}

func newActivation(r *Request, adapter types.Adapter) *activation {
	return &activation{r: r, adapter: adapter}
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	i := varIndex(name)
	if i < 0 {
		return nil, false
	}
	if a.vals[i] == nil {
		a.vals[i] = a.adapter.NativeToValue(a.native(i))
	}
	return a.vals[i], true
}

// varIndex is name's index in varNames, or -1.
func varIndex(name string) int {
	switch name {
	case "principal":
		return 0
	case "actor":
		return 1
	case "plugin":
		return 2
	case "kind":
		return 3
	case "method":
		return 4
	case "risk":
		return 5
	case "side_effect":
		return 6
	case "dry_run":
		return 7
	case "input":
		return 8
	case "run":
		return 9
	case "grant":
		return 10
	case "spent":
		return 11
	case "now":
		return 12
	}
	return -1
}

// celValue converts decoded JSON (or YAML) to CEL values all at once, so
// that each rule's lookups find CEL values instead of converting the
// same field again for every rule. Other Go values go through adapter.
func celValue(adapter types.Adapter, v any) ref.Val {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(v))
		for k, e := range v {
			m[types.String(k)] = celValue(adapter, e)
		}
		return types.NewRefValMap(adapter, m)
	case []any:
		l := make([]ref.Val, len(v))
		for i, e := range v {
			l[i] = celValue(adapter, e)
		}
		return types.NewRefValList(adapter, l)
	case string:
		return types.String(v)
	case float64:
		return types.Double(v)
	case bool:
		return types.Bool(v)
	case nil:
		return types.NullValue
	}
	return adapter.NativeToValue(v)
}

// native is variable i as a Go value.
func (a *activation) native(i int) any {
	r := a.r
	switch varNames[i] {
	case "principal":
		return r.Principal
	case "actor":
		return r.Actor
	case "plugin":
		return r.Plugin
	case "kind":
		return r.Kind
	case "method":
		return r.Method
	case "risk":
		return riskName(r.Risk)
	case "side_effect":
		return r.SideEffect
	case "dry_run":
		return r.DryRun
	case "input":
		if r.Input == nil {
			return map[string]any{}
		}
		return celValue(a.adapter, r.Input)
	case "run":
		return r.Run
	case "grant":
		return r.Grant
	case "spent":
		return r.Spent
	default: // "now"
		if r.Now.IsZero() {
			return time.Now()
		}
		return r.Now
	}
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
