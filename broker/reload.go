package broker

import (
	"maps"
	"slices"
)

// SetIntents replaces the intent bindings at once (a config reload):
// handles issued from now on, and every request the proxy forwards from
// now on, use the new bindings; a handle whose intent is gone fails with
// ErrIntentUnknown. intents must have passed Config.Validate. Leased
// intents (source vault_lease) are the lease manager's, which keeps its
// own: the caller restarts for changes to those.
func (b *Broker) SetIntents(intents map[string]Intent) {
	m := maps.Clone(intents)
	b.intents.Store(&m)
}

// intent is the binding of a configured intent.
func (b *Broker) intent(name string) (Intent, bool) {
	in, ok := (*b.intents.Load())[name]
	return in, ok
}

// leased reports whether the named intent is bound to a leased secret.
func (b *Broker) leased(name string) bool {
	in, _ := b.intent(name)
	return in.Secret.Source == SourceVaultLease
}

// IntentNames returns the configured intent names, sorted.
func (b *Broker) IntentNames() []string {
	return slices.Sorted(maps.Keys(*b.intents.Load()))
}
