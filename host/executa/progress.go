package executa

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/redact"
)

// Progress limits of the notes.
const (
	MaxProgressRate  = 50      // events per second
	MaxProgressEvent = 8 << 10 // bytes
	KeepProgress     = 500     // latest events kept
	// MaxProgressText bounds the plugin's text of an event as the
	// caller of its invoke sees it.
	MaxProgressText = 512
	// progressQueue bounds the events waiting for an invoke's caller;
	// more are not forwarded (the log keeps them).
	progressQueue = 64
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
func (l *progressLog) add(params json.RawMessage) (ProgressEvent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(params) > MaxProgressEvent || !l.lim.Allow() {
		l.dropped++
		return ProgressEvent{}, false
	}
	e := ProgressEvent{At: time.Now(), Params: append(json.RawMessage(nil), params...)}
	l.events = append(l.events, e)
	if len(l.events) > KeepProgress {
		l.events = append(l.events[:0:0], l.events[len(l.events)-KeepProgress:]...)
	}
	return e, true
}

// Progress returns the kept progress events (at most 500, oldest first)
// and how many were dropped for size or rate.
func (p *Process) Progress() ([]ProgressEvent, int) {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	return append([]ProgressEvent(nil), p.progress.events...), p.progress.dropped
}

// progressOwner is the invoke in flight an event belongs to: the one it
// names (invoke_id, context.invoke_id or metadata.executa_invoke_id), or,
// when it names none, the only one in flight. Nil otherwise: an event
// naming an invoke not in flight, or naming none while several are,
// stays in the log only.
func (p *Process) progressOwner(params json.RawMessage) *liveInvoke {
	id := invokeIDOf(params)
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != "" {
		return p.invokes[id]
	}
	if len(p.invokes) == 1 {
		for _, inv := range p.invokes {
			return inv
		}
	}
	return nil
}

// progressSink forwards an invoke's progress events, in order, to its
// caller's OnProgress on a goroutine of its own, so that a slow caller
// never holds up the plugin's other frames; past progressQueue waiting
// events, an event is not forwarded.
type progressSink struct {
	mu     sync.Mutex
	ch     chan ProgressEvent
	closed bool
	done   chan struct{}
}

func newProgressSink(on func(ProgressEvent)) *progressSink {
	s := &progressSink{ch: make(chan ProgressEvent, progressQueue), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for e := range s.ch {
			on(e)
		}
	}()
	return s
}

// offer queues e unless the sink is full or closed.
func (s *progressSink) offer(e ProgressEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	select {
	case s.ch <- e:
		return true
	default:
		return false
	}
}

// close stops the sink and waits until the events queued were
// forwarded: those the plugin sent before its answer reach the caller
// before the invoke returns.
func (s *progressSink) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	<-s.done
}

// Diagnostic is the event as the host passes it on to the invoke's
// caller: Code is the event's type as the host reads it ("tool_update",
// else "progress": a plugin cannot name another), Message the plugin's
// text — data.message, data.note or data.text when a string, else data
// (or the event without its context) as compact JSON — with
// credential-shaped values redacted by r, clipped to MaxProgressText
// bytes at a character, and valid UTF-8. It is still the plugin's text:
// a caller that shows it marks it so.
func (e ProgressEvent) Diagnostic(r *redact.Redactor) host.Diagnostic {
	var ev struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(e.Params, &ev)
	code := "progress"
	if ev.Type == "tool_update" {
		code = "tool_update"
	}
	return host.Diagnostic{Code: code, Message: clipText(r.String(progressText(e.Params, ev.Data)), MaxProgressText)}
}

// progressText is the text of an event (see Diagnostic).
func progressText(params, data json.RawMessage) string {
	if len(data) == 0 {
		var rest map[string]json.RawMessage
		if json.Unmarshal(params, &rest) != nil {
			return ""
		}
		delete(rest, "type")
		delete(rest, "context")
		delete(rest, "invoke_id")
		delete(rest, "metadata")
		if len(rest) == 0 {
			return ""
		}
		data, _ = json.Marshal(rest)
	}
	var s string
	if json.Unmarshal(data, &s) == nil {
		return s
	}
	var named struct{ Message, Note, Text *string }
	if json.Unmarshal(data, &named) == nil {
		for _, t := range []*string{named.Message, named.Note, named.Text} {
			if t != nil {
				return *t
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return ""
	}
	return buf.String()
}

// clipText is s as valid UTF-8, at most n bytes, cut at a character.
func clipText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
