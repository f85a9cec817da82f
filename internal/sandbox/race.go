//go:build linux && race

package sandbox

import "os"

// initEnv is the sandbox init's environment: empty, except that a
// race-detector build (the tests') passes GORACE on, so that a test run
// can turn off the detector's one-second sleep at every process exit
// (GORACE=atexit_sleep_ms=0). The plugin's own environment is separate
// (Spec.Env) and never includes it.
func initEnv() []string {
	if v, ok := os.LookupEnv("GORACE"); ok {
		return []string{"GORACE=" + v}
	}
	return []string{}
}
