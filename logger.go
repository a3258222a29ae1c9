package tickwire

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	glog "gvisor.dev/gvisor/pkg/log"
)

// maxLogsPerSecond bounds the records one Config.Logger receives from a
// Stack and from netstack together; beyond it records are counted
// (Stats.LogSuppressed) and the count rides on the next record that passes,
// as the attribute "suppressed".
const maxLogsPerSecond = 10

// eventLog is Config.Logger behind its rate limit: one per distinct
// *slog.Logger, shared by the Stacks that share the Logger, so that the
// budget is the Logger's. A nil *eventLog (no Logger) logs nothing and
// costs one comparison.
type eventLog struct {
	l *slog.Logger

	mu sync.Mutex
	// +checklocks:mu
	second int64 // Unix second of the current window
	// +checklocks:mu
	inWindow int // records passed in it
	// +checklocks:mu
	pending uint64 // suppressed since the last record passed

	suppressed atomic.Uint64 // all records suppressed, for Stats
	refs       int           // Stacks using it; guarded by eventLogs.mu
}

// log passes one record to the logger unless this second's budget is
// spent. It is for events off the hot path: it allocates.
func (e *eventLog) log(level slog.Level, msg string, attrs ...slog.Attr) {
	if e == nil || !e.l.Enabled(context.Background(), level) {
		return
	}
	now := time.Now().Unix()
	e.mu.Lock()
	if now != e.second {
		e.second, e.inWindow = now, 0
	}
	if e.inWindow == maxLogsPerSecond {
		e.pending++
		e.mu.Unlock()
		e.suppressed.Add(1)
		return
	}
	e.inWindow++
	pending := e.pending
	e.pending = 0
	e.mu.Unlock()
	if pending > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", pending))
	}
	e.l.LogAttrs(context.Background(), level, msg, attrs...)
}

// eventLogs holds the eventLogs of the live Stacks' Loggers. It is also
// the target of netstack's process-wide log (gVisor's pkg/log), installed
// by the first New: every record goes to each of them. netstack's records
// name no stack, so each Logger gets all of them. With no Logger anywhere
// they are dropped: a library does not write to the program's stderr
// unasked.
var eventLogs struct {
	once sync.Once
	mu   sync.Mutex
	// +checklocks:mu
	m map[*slog.Logger]*eventLog
}

// acquireEventLog returns the eventLog of l for a new Stack, nil for a nil
// l, and installs netstack's log target on the first call.
func acquireEventLog(l *slog.Logger) *eventLog {
	eventLogs.once.Do(func() { glog.SetTarget(netstackEmitter{}) })
	if l == nil {
		return nil
	}
	eventLogs.mu.Lock()
	defer eventLogs.mu.Unlock()
	if eventLogs.m == nil {
		eventLogs.m = make(map[*slog.Logger]*eventLog)
	}
	e := eventLogs.m[l]
	if e == nil {
		e = &eventLog{l: l}
		eventLogs.m[l] = e
	}
	e.refs++
	return e
}

// release drops a Stack's use of e, at its Close.
func (e *eventLog) release() {
	if e == nil {
		return
	}
	eventLogs.mu.Lock()
	defer eventLogs.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(eventLogs.m, e.l)
	}
}

// netstackEmitter implements gVisor's log.Emitter.
type netstackEmitter struct{}

// Emit implements log.Emitter.Emit.
func (netstackEmitter) Emit(_ int, level glog.Level, _ time.Time, format string, v ...any) {
	eventLogs.mu.Lock()
	targets := make([]*eventLog, 0, len(eventLogs.m))
	for _, e := range eventLogs.m {
		targets = append(targets, e)
	}
	eventLogs.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	sl := slog.LevelInfo
	switch level {
	case glog.Warning:
		sl = slog.LevelWarn
	case glog.Debug:
		sl = slog.LevelDebug
	}
	msg := "netstack: " + fmt.Sprintf(format, v...)
	for _, e := range targets {
		e.log(sl, msg, slog.String("source", "netstack"))
	}
}
