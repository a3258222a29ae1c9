package netstackunsafe

import (
	"reflect"
	"unsafe"

	"gvisor.dev/gvisor/pkg/atomicbitops"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// The tcp package's unexported pieces Process is built from. Their
// signatures are fingerprinted by TestGuard: a linked function whose
// signature changed would be called with the wrong arguments.

//go:linkname handleSegmentLocked gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).handleSegmentLocked
func handleSegmentLocked(ep *tcp.Endpoint, s unsafe.Pointer) (cont bool, err tcpip.Error)

//go:linkname segmentQueueDequeue gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*segmentQueue).dequeue
func segmentQueueDequeue(q unsafe.Pointer) unsafe.Pointer

//go:linkname segmentQueueEmpty gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*segmentQueue).empty
func segmentQueueEmpty(q unsafe.Pointer) bool

//go:linkname segmentDecRef gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*segment).DecRef
func segmentDecRef(s unsafe.Pointer)

//go:linkname resetConnectionLocked gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).resetConnectionLocked
func resetConnectionLocked(ep *tcp.Endpoint, err tcpip.Error)

//go:linkname drainClosingSegmentQueue gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).drainClosingSegmentQueue
func drainClosingSegmentQueue(ep *tcp.Endpoint)

//go:linkname startTimeWait gvisor.dev/gvisor/pkg/tcpip/transport/tcp.startTimeWait
func startTimeWait(ep *tcp.Endpoint)

//go:linkname resetKeepaliveTimer gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).resetKeepaliveTimer
func resetKeepaliveTimer(ep *tcp.Endpoint, receivedData bool)

//go:linkname sendAck gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*sender).sendAck
func sendAck(snd unsafe.Pointer)

//go:linkname selectWindow gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).selectWindow
func selectWindow(ep *tcp.Endpoint) seqnum.Size

// maxSegmentsPerRun is netstack's maxSegmentsPerWake: the segments one
// processing run takes before it lets others have the endpoint.
const maxSegmentsPerRun = 100

// fields holds the offsets of the tcp.Endpoint fields this package reads.
var fields = findFields()

type fieldOffsets struct {
	ok           bool
	ownedByUser  uintptr // atomicbitops.Uint32 in tcp.Endpoint: 1 while a user goroutine holds it
	segmentQueue uintptr // segmentQueue in tcp.Endpoint: inbound segments waiting for processing
	snd, rcv     uintptr // *sender, *receiver in tcp.Endpoint
	route        uintptr // *stack.Route in tcp.Endpoint
	waiterQueue  uintptr // *waiter.Queue in tcp.Endpoint
	maxSentAck   uintptr // seqnum.Value in sender: the highest ACK number sent
	sndUna       uintptr // seqnum.Value in sender: oldest unacknowledged
	sndNxt       uintptr // seqnum.Value in sender: next to send
	rcvNxt       uintptr // seqnum.Value in receiver: next expected
	rcvAcc       uintptr // seqnum.Value in receiver: right edge of the window advertised
	rcvMemUsed   uintptr // atomicbitops.Int32 in tcp.Endpoint: memory of queued and unread segments
	lastSendTime uintptr // tcpip.MonotonicTime in sender: when it last sent a segment
}

func findFields() fieldOffsets {
	ep := reflect.TypeFor[tcp.Endpoint]()
	direct := func(name string) (reflect.StructField, bool) {
		f, ok := ep.FieldByName(name)
		return f, ok && len(f.Index) == 1
	}
	owned, ok1 := direct("ownedByUser")
	queue, ok2 := direct("segmentQueue")
	snd, ok3 := direct("snd")
	rcv, ok4 := direct("rcv")
	route, ok5 := direct("route")
	wq, ok6 := direct("waiterQueue")
	mem, ok10 := direct("rcvMemUsed")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok10 || mem.Type != reflect.TypeFor[atomicbitops.Int32]() ||
		owned.Type != reflect.TypeFor[atomicbitops.Uint32]() ||
		queue.Type.Name() != "segmentQueue" || queue.Type.PkgPath() != ep.PkgPath() ||
		snd.Type.Kind() != reflect.Pointer || rcv.Type.Kind() != reflect.Pointer ||
		route.Type != reflect.TypeFor[*stack.Route]() || wq.Type != reflect.TypeFor[*waiter.Queue]() {
		return fieldOffsets{}
	}
	// embeddedOf finds name, of type typ, in the state struct embedded in
	// t (the sender's tcp.TCPSenderState, the receiver's
	// tcp.TCPReceiverState) and returns its offset from the start of t;
	// embedded, a seqnum.Value.
	embeddedOf := func(t reflect.Type, state reflect.Type, name string, typ reflect.Type) (uintptr, bool) {
		if t.Kind() != reflect.Struct || t.PkgPath() != ep.PkgPath() {
			return 0, false
		}
		outer, ok := t.FieldByName(state.Name())
		if !ok || !outer.Anonymous || outer.Type != state || len(outer.Index) != 1 {
			return 0, false
		}
		inner, ok := state.FieldByName(name)
		if !ok || len(inner.Index) != 1 || inner.Type != typ {
			return 0, false
		}
		return outer.Offset + inner.Offset, true
	}
	embedded := func(t reflect.Type, state reflect.Type, name string) (uintptr, bool) {
		return embeddedOf(t, state, name, reflect.TypeFor[seqnum.Value]())
	}
	sendState, recvState := reflect.TypeFor[tcp.TCPSenderState](), reflect.TypeFor[tcp.TCPReceiverState]()
	maxSentAck, ok7 := embedded(snd.Type.Elem(), sendState, "MaxSentAck")
	sndUna, ok8 := embedded(snd.Type.Elem(), sendState, "SndUna")
	rcvNxt, ok9 := embedded(rcv.Type.Elem(), recvState, "RcvNxt")
	sndNxt, ok11 := embedded(snd.Type.Elem(), sendState, "SndNxt")
	rcvAcc, ok12 := embedded(rcv.Type.Elem(), recvState, "RcvAcc")
	lastSend, ok13 := embeddedOf(snd.Type.Elem(), sendState, "LastSendTime", reflect.TypeFor[tcpip.MonotonicTime]())
	if !ok7 || !ok8 || !ok9 || !ok11 || !ok12 || !ok13 {
		return fieldOffsets{}
	}
	return fieldOffsets{ok: true, ownedByUser: owned.Offset, segmentQueue: queue.Offset,
		snd: snd.Offset, rcv: rcv.Offset, route: route.Offset, waiterQueue: wq.Offset,
		maxSentAck: maxSentAck, sndUna: sndUna, sndNxt: sndNxt, rcvNxt: rcvNxt, rcvAcc: rcvAcc, rcvMemUsed: mem.Offset,
		lastSendTime: lastSend}
}

// Available reports whether the tcp.Endpoint fields the package reads were
// found. When it is false, no other function of this file may be called.
func Available() bool { return fields.ok }

// field returns the pointer field at off in ep.
func field(ep *tcp.Endpoint, off uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(ep), off))
}

func sender(ep *tcp.Endpoint) unsafe.Pointer { return field(ep, fields.snd) }

func sndUna(ep *tcp.Endpoint) seqnum.Value {
	return *(*seqnum.Value)(unsafe.Add(sender(ep), fields.sndUna))
}

// TimeWaitPoints returns the sequence numbers a connection in TIME-WAIT
// answers with: the next it would send (SndNxt, one past its FIN) and the
// next it expects (RcvNxt, one past the peer's FIN). The caller must hold
// ep's lock, as a waiter callback run by netstack's startTimeWait does (it
// notifies EventHUp with the lock held, once the state is TIME-WAIT); in
// TIME-WAIT netstack changes neither number.
func TimeWaitPoints(ep *tcp.Endpoint) (sndNxt, rcvNxt seqnum.Value) {
	sndNxt = *(*seqnum.Value)(unsafe.Add(sender(ep), fields.sndNxt))
	rcvNxt = *(*seqnum.Value)(unsafe.Add(field(ep, fields.rcv), fields.rcvNxt))
	return sndNxt, rcvNxt
}

// unacked is how far the receive point is ahead of the last ACK sent: the
// bytes (and FIN) received but not yet acknowledged. Needs ep's lock.
func unacked(ep *tcp.Endpoint) seqnum.Size {
	maxSentAck := *(*seqnum.Value)(unsafe.Add(sender(ep), fields.maxSentAck))
	rcvNxt := *(*seqnum.Value)(unsafe.Add(field(ep, fields.rcv), fields.rcvNxt))
	return maxSentAck.Size(rcvNxt)
}

// peerWindow is how many more bytes the peer may send within the window
// last advertised to it. Needs ep's lock.
func peerWindow(ep *tcp.Endpoint) seqnum.Size {
	rcv := field(ep, fields.rcv)
	rcvNxt := *(*seqnum.Value)(unsafe.Add(rcv, fields.rcvNxt))
	rcvAcc := *(*seqnum.Value)(unsafe.Add(rcv, fields.rcvAcc))
	if !rcvNxt.LessThan(rcvAcc) {
		return 0
	}
	return rcvNxt.Size(rcvAcc)
}

// OwnedByUser returns ep's "held by a user goroutine" flag. Set while
// holding ep's lock, it makes netstack's dispatcher queue inbound segments
// without waking a processor: whoever holds the lock hands them on when it
// lets go (UnlockUser, Kick, Unlock).
func OwnedByUser(ep *tcp.Endpoint) *atomicbitops.Uint32 {
	return (*atomicbitops.Uint32)(unsafe.Add(unsafe.Pointer(ep), fields.ownedByUser))
}

// QueuedBytes returns the memory netstack counts against ep's receive
// buffer (rcvMemUsed): every inbound segment ep holds, whether waiting in
// its queue for processing or holding data the program has not read yet,
// each counted as its bytes plus the segment's and packet's structures.
// netstack's queue admits a segment with payload only while this is within
// the receive buffer, but one without payload at any level, which is what
// lets a flood of SYNs, ACKs or RSTs queue without bound at a listener.
// One atomic load.
func QueuedBytes(ep *tcp.Endpoint) int {
	return int((*atomicbitops.Int32)(unsafe.Add(unsafe.Pointer(ep), fields.rcvMemUsed)).Load())
}

// QueueEmpty reports whether ep has no inbound segment waiting for
// processing, under the queue's own mutex.
func QueueEmpty(ep *tcp.Endpoint) bool {
	return segmentQueueEmpty(unsafe.Add(unsafe.Pointer(ep), fields.segmentQueue))
}

// Connected reports whether an endpoint in state s is one that netstack's
// processors handle with handleConnected and Process may take: a connected
// state other than TIME-WAIT (tcp.EndpointState.connected, less the state
// netstack handles with handleTimeWait).
func Connected(s tcp.EndpointState) bool {
	switch s {
	case tcp.StateEstablished, tcp.StateFinWait1, tcp.StateFinWait2, tcp.StateCloseWait, tcp.StateClosing, tcp.StateLastAck:
		return true
	}
	return false
}

// Process does for ep what netstack's processor goroutine does for a
// connected endpoint (handleConnected, handleSegmentsLocked): it takes ep's
// lock if free (else returns at once, as handleConnected does), processes up
// to 100 queued segments, sends what they call for, and handles resets, FIN
// and TIME-WAIT. It leaves the lock released, handing segments queued
// meanwhile to a processor. One difference: the ACK for the processed
// segments is sent only when they leave more than mss bytes
// unacknowledged; otherwise Process reports it as owed, for the caller to
// let the next segment carry or to send with SettleACK.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func Process(ep *tcp.Endpoint, mss seqnum.Size) (owed bool) {
	if !TryLock(ep) {
		return false
	}
	if !Connected(ep.EndpointState()) {
		Unlock(ep)
		return false
	}
	una := sndUna(ep)
	var err tcpip.Error
	finished := true // handleSegmentsLocked reaches its end
	queue := unsafe.Add(unsafe.Pointer(ep), fields.segmentQueue)
	for range maxSegmentsPerRun {
		if st := ep.EndpointState(); st == tcp.StateClose || st == tcp.StateError || st == tcp.StateTimeWait {
			finished = false
			break
		}
		s := segmentQueueDequeue(queue)
		if s == nil {
			break
		}
		cont, e := handleSegmentLocked(ep, s)
		segmentDecRef(s)
		if e != nil || !cont {
			err, finished = e, false
			break
		}
	}
	if finished {
		if una.LessThan(sndUna(ep)) {
			(*stack.Route)(field(ep, fields.route)).ConfirmReachable()
		}
		if n := unacked(ep); n > mss {
			sendAck(sender(ep))
		} else {
			owed = n > 0
		}
		resetKeepaliveTimer(ep, true)
	}
	if err != nil {
		resetConnectionLocked(ep, err)
	}
	switch st := ep.EndpointState(); {
	case err != nil || st == tcp.StateClose:
		OwnedByUser(ep).Store(0)
		ep.ResumeWork() // the endpoint is closed: nothing to hand on
		drainClosingSegmentQueue(ep)
		(*waiter.Queue)(field(ep, fields.waiterQueue)).Notify(waiter.EventHUp | waiter.EventErr | waiter.ReadableEvents | waiter.WritableEvents)
		return false
	case st == tcp.StateTimeWait:
		startTimeWait(ep)
	}
	Unlock(ep)
	return owed
}

// TryLock takes ep's lock if it is free, as ep.TryLock does, and marks ep
// owned by a user goroutine (OwnedByUser) for as long as it is held. The
// mark keeps netstack's processor from spinning on ep: a processor woken for
// ep while tickwire holds it tries the lock, fails, and requeues ep to
// itself for as long as ep is not marked owned, a busy loop on
// segmentQueue.empty and epQueue.enqueue that took a third of the CPU of a
// bulk transfer in latency mode, where Process holds ep while it sends a
// window's worth of segments. Marked, a processor leaves ep alone and the
// dispatcher queues ep's segments without waking one: Unlock (UnlockUser),
// which must release the lock, hands what was queued meanwhile to a
// processor.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func TryLock(ep *tcp.Endpoint) bool {
	if !ep.TryLock() {
		return false
	}
	OwnedByUser(ep).Store(1)
	return true
}

// Unlock releases ep's lock, taken with TryLock (or ep.TryLock), waking a
// processor if segments were queued meanwhile.
//
// It marks ep owned by a user goroutine (TryLock already did) and calls UnlockUser, netstack's
// own release for a lock taken with LockUser, because UnlockUser is the one
// exported call that checks the segment queue under the queue's mutex and
// wakes a processor if it is not empty; ResumeWork alone would strand a
// segment queued while ep was held. The mark is safe: ep's lock is held
// throughout, so no processor runs ep, and the only readers of the flag
// are the dispatcher, which then queues a segment without waking a
// processor (UnlockUser, which follows at once, finds the segment and wakes
// one), and LockUser, which then sleeps on the lock instead of spinning.
// UnlockUser clears the flag before it releases the lock.
//
// +checklocksignore: the lock was taken by TryLock, which checklocks cannot follow.
func Unlock(ep *tcp.Endpoint) {
	OwnedByUser(ep).Store(1)
	ep.UnlockUser()
}

// Kick hands whatever is left in ep's segment queue to netstack's
// processor. When ep is held by someone else, that holder sees the queue
// when it lets go (a user's UnlockUser, a processor's requeue check,
// another Kick or Unlock).
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func Kick(ep *tcp.Endpoint) {
	if TryLock(ep) {
		Unlock(ep)
	}
}

// KeepCwnd marks ep's sender as having sent at now, so that its next send
// does not take the congestion window back to the initial window (10
// segments) for having sent nothing for longer than the retransmission
// timeout (sender.sendData, RFC 5681 section 4.1); the mark is all that
// LastSendTime serves. It reports false, doing nothing, when ep is busy.
// Called more often than the minimum RTO, it keeps the window across idle
// periods, as Linux's net.ipv4.tcp_slow_start_after_idle=0 does.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func KeepCwnd(ep *tcp.Endpoint, now tcpip.MonotonicTime) bool {
	if !TryLock(ep) {
		return false
	}
	*(*tcpip.MonotonicTime)(unsafe.Add(sender(ep), fields.lastSendTime)) = now
	Unlock(ep)
	return true
}

// SettleACK sends ep's owed ACK if nothing carried it yet (sent), or
// reports ep busy (!ok: try again later).
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func SettleACK(ep *tcp.Endpoint) (sent, ok bool) {
	if !TryLock(ep) {
		return false, false
	}
	if Connected(ep.EndpointState()) && unacked(ep) > 0 {
		sendAck(sender(ep))
		sent = true
	}
	Unlock(ep)
	return sent, true
}

// SettleACKOver sends ep's ACK when more than mss bytes are received but
// unacknowledged, as Process does at the end of its run, and reports
// whether a smaller ACK remains owed; !ok when ep is busy (the ACK, if any,
// remains owed).
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func SettleACKOver(ep *tcp.Endpoint, mss seqnum.Size) (owed, ok bool) {
	if !TryLock(ep) {
		return false, false
	}
	if Connected(ep.EndpointState()) {
		if n := unacked(ep); n > mss {
			sendAck(sender(ep))
		} else {
			owed = n > 0
		}
	}
	Unlock(ep)
	return owed, true
}

// ACKOwed reports whether ep has received bytes it has not acknowledged;
// !ok when ep is busy.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func ACKOwed(ep *tcp.Endpoint) (owed, ok bool) {
	if !TryLock(ep) {
		return false, false
	}
	owed = Connected(ep.EndpointState()) && unacked(ep) > 0
	Unlock(ep)
	return owed, true
}

// UpdateWindow sends ep an ACK after a read when the window it would now
// advertise is at least twice what the peer may still send within the
// window advertised last (the rule of Linux's tcp_cleanup_rbuf: a read
// that freed "lots" of buffer is announced at once). netstack announces a
// read only when the window grows back past one segment from below it,
// which leaves a sender that filled most of the window waiting for the
// next ACK: in latency mode, an owed one (see Process) that the timer
// sends up to 1 ms later. A request/reply exchange, whose reads free a
// small part of the window, sends nothing here; nor does a window under
// mss bytes (silly window avoidance). It reports whether it sent;
// false also when ep is busy (whoever holds it sends the next segment, with
// the window of that moment).
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func UpdateWindow(ep *tcp.Endpoint, mss seqnum.Size) (sent bool) {
	if !TryLock(ep) {
		return false
	}
	switch ep.EndpointState() {
	case tcp.StateEstablished, tcp.StateFinWait1, tcp.StateFinWait2: // the peer may still send
		if w := selectWindow(ep); w >= mss && w >= 2*peerWindow(ep) {
			sendAck(sender(ep))
			sent = true
		}
	}
	Unlock(ep)
	return sent
}

// netstack's processor's handlers for the states other than the connected
// ones; each takes ep's lock if free (else returns at once) and releases it.

//go:linkname handleListen gvisor.dev/gvisor/pkg/tcpip/transport/tcp.handleListen
func handleListen(ep *tcp.Endpoint)

//go:linkname handleConnecting gvisor.dev/gvisor/pkg/tcpip/transport/tcp.handleConnecting
func handleConnecting(ep *tcp.Endpoint)

//go:linkname handleTimeWait gvisor.dev/gvisor/pkg/tcpip/transport/tcp.handleTimeWait
func handleTimeWait(ep *tcp.Endpoint)

// ProcessQueued does for ep, whatever its state, what netstack's processor
// goroutine does when it takes ep from its queue (processor.start): it
// processes ep's queued segments with netstack's handler for the state (a
// listener's SYNs and handshake ACKs, a handshake's segments, TIME-WAIT's),
// or, in a connected state, as Process does, the ACK owed when the
// segments leave at most mss bytes unacknowledged (reported; the caller
// sends it with SettleACK or lets a segment carry it). Each handler takes
// ep's lock if it is free and returns at once otherwise; a processor then
// requeues ep, while ProcessQueued leaves whatever is still queued to the
// caller (Kick). The caller must hold no lock netstack's handlers take: no
// endpoint lock, and no lock held while sending (a listener answering a
// SYN holds its accept queue's).
func ProcessQueued(ep *tcp.Endpoint, mss seqnum.Size) (owed bool) {
	switch st := ep.EndpointState(); {
	case st == tcp.StateListen:
		handleListen(ep)
	case st == tcp.StateConnecting || st == tcp.StateSynSent || st == tcp.StateSynRecv:
		handleConnecting(ep)
	case st == tcp.StateTimeWait:
		handleTimeWait(ep)
	case Connected(st):
		return Process(ep, mss)
	}
	return false
}
