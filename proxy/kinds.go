package proxy

import (
	"net/http"

	"github.com/airlock-dev/airlock/broker"
)

// injector applies one inject kind (broker.InjectKind) to requests. Each
// kind's injector is registered under the kind's config name
// (registerInjector, from the init function of the kind's file); the
// proxy resolves it once per request, with the intent, and refuses a
// request whose kind has none: a kind the proxy does not know is never
// sent without its credential.
type injector interface {
	// inject applies the secret to r as the plugin sent it (before its
	// URL is rewritten) and returns the forms the echo guard catches.
	inject(r *http.Request, k broker.InjectKind, s broker.Secret, handle string) (*echoForms, *denial)
	// process applies the kind to r exactly as it will be sent (https
	// URL, final headers): a signature, an access token. It runs after
	// inject, and again on a retry; it may add to x.forms.
	process(r *http.Request, x *exchange) *denial
	// policy says how the kind's requests are audited and replayed;
	// false when k is not the settings type this injector applies.
	policy(k broker.InjectKind) (kindPolicy, bool)
}

// kindPolicy is what prepare and retry need to know about a kind.
type kindPolicy struct {
	// processor: the kind derives what is sent (process does the work),
	// and the audit line names it.
	processor bool
	// tokenRetry: a request refused with 401 is replayed once with a
	// fresh access token, whatever its method.
	tokenRetry bool
	// restore names the headers inject rewrites in place (placeholder
	// substitution); a replay starts again from their values as sent.
	restore []string
}

// injectors are the registered injectors by kind name; written only by
// init functions.
var injectors = map[string]injector{}

// registerInjector adds the injector of kind name; it panics on a
// duplicate or on a name the broker does not know (a wiring mistake).
func registerInjector(name string, inj injector) {
	if _, ok := broker.NewInjectKind(name); !ok {
		panic("proxy: injector for unknown inject kind " + name)
	}
	if _, dup := injectors[name]; dup {
		panic("proxy: two injectors for inject kind " + name)
	}
	injectors[name] = inj
}

// injectorFor resolves the injector of an intent's kind, or refuses.
func injectorFor(in broker.Intent) (injector, kindPolicy, *denial) {
	if in.Inject.Kind == nil {
		return nil, kindPolicy{}, deny(CodeInjectUnsupported, "the intent has no inject kind; no request was sent").withReason("intent not bound")
	}
	inj, ok := injectors[in.Inject.Kind.Kind()]
	if !ok {
		return nil, kindPolicy{}, deny(CodeInjectUnsupported, "the intent's inject kind is not supported by this proxy; no request was sent").
			withReason("no injector for kind " + in.Inject.Kind.Kind())
	}
	pol, ok := inj.policy(in.Inject.Kind)
	if !ok {
		return nil, kindPolicy{}, kindMismatch()
	}
	return inj, pol, nil
}

// kindFuncs is an injector made of functions over the kind's own
// settings type K: a nil onInject sends nothing of the secret before
// process (the echo guard still catches its forms), a nil onProcess does
// nothing (a static kind), a nil onPolicy is the zero policy.
type kindFuncs[K broker.InjectKind] struct {
	onInject  func(r *http.Request, k K, s broker.Secret, handle string) (*echoForms, *denial)
	onProcess func(r *http.Request, x *exchange, k K) *denial
	onPolicy  func(k K) kindPolicy
}

// kindMismatch: settings of another type under this kind's name.
func kindMismatch() *denial {
	return deny(CodeInjectUnsupported, "the intent's inject settings do not match its kind; no request was sent").withReason("settings type mismatch")
}

func (f kindFuncs[K]) inject(r *http.Request, k broker.InjectKind, s broker.Secret, handle string) (*echoForms, *denial) {
	kk, ok := k.(K)
	if !ok {
		return nil, kindMismatch()
	}
	if f.onInject == nil {
		return secretOnlyForms(s.Value), nil
	}
	return f.onInject(r, kk, s, handle)
}

func (f kindFuncs[K]) process(r *http.Request, x *exchange) *denial {
	kk, ok := x.intent.Inject.Kind.(K)
	if !ok {
		return kindMismatch()
	}
	if f.onProcess == nil {
		return nil
	}
	return f.onProcess(r, x, kk)
}

func (f kindFuncs[K]) policy(k broker.InjectKind) (kindPolicy, bool) {
	kk, ok := k.(K)
	if !ok {
		return kindPolicy{}, false
	}
	var p kindPolicy
	if f.onPolicy != nil {
		p = f.onPolicy(kk)
	}
	p.processor = f.onProcess != nil
	return p, true
}

// secretOnlyForms are the forms of the secret alone.
func secretOnlyForms(secret string) *echoForms {
	return cachedForms(formsKey{secret: secret}, func() []string { return encodings(secret) })
}
