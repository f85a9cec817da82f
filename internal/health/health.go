// Package health records the outcome of a periodic reload (the token
// signing keys, the intercept CA), so that a reload that keeps failing
// makes the process not ready and is counted, instead of being a log line
// while the process serves from what it loaded last.
//
// # Concurrency
//
// A Reload is safe for concurrent use; its zero value is ready.
package health

import (
	"context"
	"sync/atomic"
)

// Reload is the state of one reloaded resource.
type Reload struct {
	last     atomic.Pointer[error]
	failures atomic.Uint64
}

// Record stores the outcome of one reload: a failure is counted and kept
// until a later reload succeeds.
func (r *Reload) Record(err error) {
	if err == nil {
		r.last.Store(nil)
		return
	}
	r.failures.Add(1)
	r.last.Store(&err)
}

// Err is the last reload's error, nil when it succeeded (or none ran).
func (r *Reload) Err() error {
	if p := r.last.Load(); p != nil {
		return *p
	}
	return nil
}

// Check is Err as a readiness check.
func (r *Reload) Check(context.Context) error { return r.Err() }

// Failures counts the failed reloads since the process started.
func (r *Reload) Failures() float64 { return float64(r.failures.Load()) }
