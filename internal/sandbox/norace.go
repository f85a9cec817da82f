//go:build linux && !race

package sandbox

// initEnv is the sandbox init's environment: empty (the plugin's own is
// Spec.Env, set by the init).
func initEnv() []string { return []string{} }
