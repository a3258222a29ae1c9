// Package netstackunsafe is every reach into the unexported internals of the
// gVisor netstack that go.mod pins: the go:linkname declarations and the
// reflect-found field offsets that latency mode needs, and the runtime's
// monotonic clock. Nothing else in tickwire uses go:linkname or reads a
// netstack field by offset; everything else goes through netstack's exported
// API.
//
// The TCP half processes an endpoint's queued inbound segments on the
// caller's goroutine, as one of netstack's processor goroutines would
// (Process), except that the ACK for them is reported as owed instead of
// sent; SettleACK sends such an ACK later, and UpdateWindow announces the
// window a read opened. TryLock takes an endpoint's lock marked as a user
// goroutine's, so that netstack's processor does not spin on it; Kick and
// Unlock release it so that segments queued meanwhile reach a processor.
// TimeWaitPoints reads the sequence numbers a connection in TIME-WAIT
// answers with, for the stack's TIME-WAIT records. The clock half builds a tcpip.MonotonicTime from the runtime's
// monotonic nanoseconds without a time.Time.
//
//	if netstackunsafe.Available() {
//		// Locks ep if free, processes its queued segments, releases it.
//		if netstackunsafe.Process(ep, mss) {
//			// Later, unless a segment carried the ACK meanwhile:
//			netstackunsafe.SettleACK(ep)
//		}
//	}
//
// # Safety
//
// Each piece is checked twice. When the package loads, the fields it reads
// are found by name and type with reflect; if any is missing, Available
// reports false and tickwire leaves TCP to netstack's processors (and
// MonotonicAvailable false makes it use netstack's standard clock), so a
// changed layout costs speed, never memory safety. The linked functions and
// the code Process mirrors cannot be checked that way: TestGuard
// fingerprints, from the module's source, every gVisor declaration this
// package mirrors, relies on or links to, body included (a linked
// function's new body may expect other locks or references of its
// caller), and fails when one changes.
//
// # When TestGuard fails
//
// A gVisor upgrade changed code this package depends on. For each
// declaration the failure names, diff its old and new source (both versions
// are in the module cache: go mod download -json gvisor.dev/gvisor@<old>).
// For a linked function, make the go:linkname declaration's signature match
// and check what the new code expects of its caller (locks held, references
// taken). For a mirrored one (handleConnected, handleSegmentsLocked), carry
// the change into Process, keeping its one difference: the final ACK is
// reported as owed unless more than mss bytes are unacknowledged
// (handleTimeWaitSegment is mirrored by the root package's
// timeWaitTable.answer, and consumeSegment and startTimeWait must still
// enter TIME-WAIT with RcvNxt past the peer's FIN and notify EventHUp
// holding the lock, which TimeWaitPoints relies on). For
// UnlockUser, LockUser and queuePacket, check that ownedByUser still means
// "held by a user goroutine: queue segments, wake no processor" and that
// UnlockUser still hands a non-empty queue to a processor. Then run the
// latency-mode tests of the root package (go test -race ./...) and update
// the fingerprints with the values the failure prints. If a piece is gone
// for good, make Available report false: latency mode then runs on
// netstack's processors, slower but correct.
package netstackunsafe
