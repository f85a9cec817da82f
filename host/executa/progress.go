package executa

import (
	"encoding/json"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Progress limits of the notes.
const (
	MaxProgressRate  = 50      // events per second
	MaxProgressEvent = 8 << 10 // bytes
	KeepProgress     = 500     // latest events kept
)

// ProgressEvent is one accepted executa/progress notification.
type ProgressEvent struct {
	At     time.Time
	Params json.RawMessage
}

type progressLog struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	events  []ProgressEvent
	dropped int
}

func newProgressLog() *progressLog {
	return &progressLog{lim: rate.NewLimiter(MaxProgressRate, MaxProgressRate)}
}

// add keeps an event if it is small enough and within the rate.
func (l *progressLog) add(params json.RawMessage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(params) > MaxProgressEvent || !l.lim.Allow() {
		l.dropped++
		return false
	}
	l.events = append(l.events, ProgressEvent{At: time.Now(), Params: append(json.RawMessage(nil), params...)})
	if len(l.events) > KeepProgress {
		l.events = append(l.events[:0:0], l.events[len(l.events)-KeepProgress:]...)
	}
	return true
}

// Progress returns the kept progress events (at most 500, oldest first)
// and how many were dropped for size or rate.
func (p *Process) Progress() ([]ProgressEvent, int) {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	return append([]ProgressEvent(nil), p.progress.events...), p.progress.dropped
}
