package config

import (
	"fmt"
	"maps"
	"slices"
)

// checkIntentReferences: every broker intent the host section names (the
// OpenAI sampling backend's key, each Executa plugin's credentials) is
// one broker.intents declares; otherwise the call fails at run time with
// "unknown intent". The message names the key, never the value.
func (c *Config) checkIntentReferences() []error {
	if len(c.Broker.Intents) == 0 {
		// A host-only file whose broker runs elsewhere declares no intents
		// here: there is nothing to check the names against.
		return nil
	}
	var errs []error
	declared := func(name string) bool { _, ok := c.Broker.Intents[name]; return ok }
	if o := c.Host.Executa.Sampling.OpenAI; o != nil && o.Intent != "" && !declared(o.Intent) {
		errs = append(errs, fmt.Errorf("host.executa.sampling.openai.intent: names no intent of broker.intents"))
	}
	for i, p := range c.Host.Executa.Plugins {
		for _, k := range slices.Sorted(maps.Keys(p.Credentials)) {
			if v := p.Credentials[k]; v != "" && !declared(v) && envName.MatchString(k) {
				errs = append(errs, fmt.Errorf("host.executa.plugins[%d].credentials.%s: names no intent of broker.intents", i, k))
			}
		}
	}
	return errs
}
