// Package ratelog logs an event that may repeat at any rate (a failed
// password, a tag created) without letting the repeats flood the log: the
// first Burst events of each Window are logged one by one, the others are
// counted, and one summary line at the end of the window says how many
// there were ("... 57 more times in the last minute", with the last
// event's attributes).
package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Options configure a Logger. Zero fields take the defaults below.
type Options struct {
	// Burst is how many events a window logs one by one; 0 is 10.
	Burst int
	// Window is the period the burst is counted over; 0 is a minute.
	Window time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// AfterFunc runs f after d, as time.AfterFunc, and returns what stops
	// it; nil is time.AfterFunc. Tests inject one to end a window on cue.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Logger logs one kind of event, at one level, with one message.
type Logger struct {
	log    *slog.Logger
	level  slog.Level
	msg    string
	burst  int
	window time.Duration
	now    func() time.Time
	after  func(d time.Duration, f func()) (stop func() bool)

	mu        sync.Mutex
	start     time.Time // of the current window; zero when none is open
	logged    int       // events logged one by one in it
	dropped   int64     // events counted but not logged in it
	lastAttrs []any     // of the last event dropped, for the summary
	total     int64     // events since New
}

// New returns a Logger of msg at level on log.
func New(log *slog.Logger, level slog.Level, msg string, opts Options) *Logger {
	if opts.Burst <= 0 {
		opts.Burst = 10
	}
	if opts.Window <= 0 {
		opts.Window = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	return &Logger{log: log, level: level, msg: msg, burst: opts.Burst, window: opts.Window, now: opts.Now, after: opts.AfterFunc}
}

// Log records one event with its attributes (key, value pairs as
// slog.Logger.Log takes them).
func (l *Logger) Log(args ...any) {
	l.mu.Lock()
	l.total++
	if l.start.IsZero() {
		l.start = l.now()
		l.after(l.window, l.flush)
	}
	if l.logged < l.burst {
		l.logged++
		l.mu.Unlock()
		l.log.Log(context.Background(), l.level, l.msg, args...)
		return
	}
	l.dropped++
	l.lastAttrs = args
	l.mu.Unlock()
}

// Total is the number of events since New, logged or not.
func (l *Logger) Total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// flush ends the window: the summary line when events were dropped.
func (l *Logger) flush() {
	l.mu.Lock()
	dropped, last, since := l.dropped, l.lastAttrs, l.start
	l.start, l.logged, l.dropped, l.lastAttrs = time.Time{}, 0, 0, nil
	l.mu.Unlock()
	if dropped == 0 {
		return
	}
	args := []any{"not_logged", dropped, "since", since.UTC().Format(time.RFC3339), "window", l.window.String(), slog.Group("last", last...)}
	l.log.Log(context.Background(), l.level, Summary(l.msg, dropped, l.window), args...)
}

// Summary is the message of a window's summary line: "cluster: heartbeat
// failed 57 more times in the last minute"; the last event's attributes
// follow it in the group "last" (last.err=...).
func Summary(msg string, n int64, window time.Duration) string {
	times := "times"
	if n == 1 {
		times = "time"
	}
	return fmt.Sprintf("%s %d more %s in the last %s", msg, n, times, span(window))
}

// span is a window as a reader says it: "minute", "10 seconds", "1h30m0s".
func span(d time.Duration) string {
	switch {
	case d == time.Minute:
		return "minute"
	case d == time.Hour:
		return "hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d seconds", d/time.Second)
	}
	return d.String()
}

// Flush ends the current window now, writing its summary (at shutdown).
func (l *Logger) Flush() { l.flush() }
