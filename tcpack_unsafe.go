package tickwire

import (
	"reflect"
	"unsafe"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// netstack acknowledges every batch of segments it processes at once: the
// processor's handleConnected ends with "send an ACK if the receive point
// moved". In latency mode that ACK is nearly always replaced by the answer
// a handler writes right after, or by the program's next request (see
// outbox), yet building and routing it costs as much as any segment (about
// 7% of a round trip per side). tcpProcess is handleConnected without that
// last step: it reports the ACK as owed instead, and the syncer sends it
// only if nothing has carried it by the delayed-ACK deadline (settle, owe).
//
// It is handleConnected rebuilt from the tcp package's unexported pieces,
// reached as in tcpsync_unsafe.go and checked the same way: when any is
// missing, ackInternals.ok is false and the syncer calls handleConnected.

//go:linkname tcpHandleSegmentLocked gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).handleSegmentLocked
func tcpHandleSegmentLocked(ep *tcp.Endpoint, s unsafe.Pointer) (cont bool, err tcpip.Error)

//go:linkname tcpSegmentQueueDequeue gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*segmentQueue).dequeue
func tcpSegmentQueueDequeue(q unsafe.Pointer) unsafe.Pointer

//go:linkname tcpSegmentDecRef gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*segment).DecRef
func tcpSegmentDecRef(s unsafe.Pointer)

//go:linkname tcpResetConnectionLocked gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).resetConnectionLocked
func tcpResetConnectionLocked(ep *tcp.Endpoint, err tcpip.Error)

//go:linkname tcpDrainClosingSegmentQueue gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).drainClosingSegmentQueue
func tcpDrainClosingSegmentQueue(ep *tcp.Endpoint)

//go:linkname tcpStartTimeWait gvisor.dev/gvisor/pkg/tcpip/transport/tcp.startTimeWait
func tcpStartTimeWait(ep *tcp.Endpoint)

//go:linkname tcpResetKeepaliveTimer gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*Endpoint).resetKeepaliveTimer
func tcpResetKeepaliveTimer(ep *tcp.Endpoint, receivedData bool)

//go:linkname tcpSendAck gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*sender).sendAck
func tcpSendAck(snd unsafe.Pointer)

// maxSegmentsPerRun is netstack's maxSegmentsPerWake: the segments one
// processing run takes before it lets others have the endpoint.
const maxSegmentsPerRun = 100

// ackInternals holds the offsets of the fields tcpProcess reads.
var ackInternals = findACKInternals()

type ackFieldOffsets struct {
	ok          bool
	snd, rcv    uintptr // *sender, *receiver in tcp.Endpoint
	route       uintptr // *stack.Route in tcp.Endpoint
	waiterQueue uintptr // *waiter.Queue in tcp.Endpoint
	maxSentAck  uintptr // seqnum.Value in sender: the highest ACK number sent
	sndUna      uintptr // seqnum.Value in sender: oldest unacknowledged
	rcvNxt      uintptr // seqnum.Value in receiver: next expected
}

func findACKInternals() ackFieldOffsets {
	if !tcpInternals.ok {
		return ackFieldOffsets{}
	}
	ep := reflect.TypeFor[tcp.Endpoint]()
	pointerTo := func(name string) (reflect.StructField, bool) {
		f, ok := ep.FieldByName(name)
		return f, ok && len(f.Index) == 1 && f.Type.Kind() == reflect.Pointer
	}
	snd, ok1 := pointerTo("snd")
	rcv, ok2 := pointerTo("rcv")
	route, ok3 := pointerTo("route")
	wq, ok4 := pointerTo("waiterQueue")
	if !ok1 || !ok2 || !ok3 || !ok4 || route.Type != reflect.TypeFor[*gstack.Route]() || wq.Type != reflect.TypeFor[*waiter.Queue]() {
		return ackFieldOffsets{}
	}
	// embedded finds name in the state struct embedded in t (the sender's
	// tcp.TCPSenderState, the receiver's tcp.TCPReceiverState) and returns
	// its offset from the start of t.
	embedded := func(t reflect.Type, state reflect.Type, name string) (uintptr, bool) {
		if t.Kind() != reflect.Struct || t.PkgPath() != ep.PkgPath() {
			return 0, false
		}
		outer, ok := t.FieldByName(state.Name())
		if !ok || !outer.Anonymous || outer.Type != state || len(outer.Index) != 1 {
			return 0, false
		}
		inner, ok := state.FieldByName(name)
		if !ok || len(inner.Index) != 1 || inner.Type != reflect.TypeFor[seqnum.Value]() {
			return 0, false
		}
		return outer.Offset + inner.Offset, true
	}
	sendState, recvState := reflect.TypeFor[tcp.TCPSenderState](), reflect.TypeFor[tcp.TCPReceiverState]()
	maxSentAck, ok5 := embedded(snd.Type.Elem(), sendState, "MaxSentAck")
	sndUna, ok6 := embedded(snd.Type.Elem(), sendState, "SndUna")
	rcvNxt, ok7 := embedded(rcv.Type.Elem(), recvState, "RcvNxt")
	if !ok5 || !ok6 || !ok7 {
		return ackFieldOffsets{}
	}
	return ackFieldOffsets{ok: true, snd: snd.Offset, rcv: rcv.Offset, route: route.Offset, waiterQueue: wq.Offset,
		maxSentAck: maxSentAck, sndUna: sndUna, rcvNxt: rcvNxt}
}

// field returns the pointer field at off in ep.
func field(ep *tcp.Endpoint, off uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(ep), off))
}

func tcpSender(ep *tcp.Endpoint) unsafe.Pointer { return field(ep, ackInternals.snd) }

func tcpSndUna(ep *tcp.Endpoint) seqnum.Value {
	return *(*seqnum.Value)(unsafe.Add(tcpSender(ep), ackInternals.sndUna))
}

// tcpUnacked is how far the receive point is ahead of the last ACK sent:
// the bytes (and FIN) received but not yet acknowledged. Needs ep's lock.
func tcpUnacked(ep *tcp.Endpoint) seqnum.Size {
	maxSentAck := *(*seqnum.Value)(unsafe.Add(tcpSender(ep), ackInternals.maxSentAck))
	rcvNxt := *(*seqnum.Value)(unsafe.Add(field(ep, ackInternals.rcv), ackInternals.rcvNxt))
	return maxSentAck.Size(rcvNxt)
}

// tcpProcess does what netstack's handleConnected does for ep, except that
// the ACK for the processed segments is sent only when they leave more than
// mss bytes unacknowledged; otherwise it reports the ACK as owed. It takes
// ep's lock if free (else returns at once, as handleConnected does) and
// leaves it released, handing segments queued meanwhile to a processor.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func tcpProcess(ep *tcp.Endpoint, mss seqnum.Size) (owed bool) {
	if !ep.TryLock() {
		return false
	}
	if !syncState(ep.EndpointState()) {
		unlockEndpoint(ep)
		return false
	}
	sndUna := tcpSndUna(ep)
	var err tcpip.Error
	finished := true // stock handleSegmentsLocked reaches its end
	queue := unsafe.Add(unsafe.Pointer(ep), tcpInternals.segmentQueue)
	for range maxSegmentsPerRun {
		if st := ep.EndpointState(); st == tcp.StateClose || st == tcp.StateError || st == tcp.StateTimeWait {
			finished = false
			break
		}
		s := tcpSegmentQueueDequeue(queue)
		if s == nil {
			break
		}
		cont, e := tcpHandleSegmentLocked(ep, s)
		tcpSegmentDecRef(s)
		if e != nil || !cont {
			err, finished = e, false
			break
		}
	}
	if finished {
		if sndUna.LessThan(tcpSndUna(ep)) {
			(*gstack.Route)(field(ep, ackInternals.route)).ConfirmReachable()
		}
		if n := tcpUnacked(ep); n > mss {
			tcpSendAck(tcpSender(ep))
		} else {
			owed = n > 0
		}
		tcpResetKeepaliveTimer(ep, true)
	}
	if err != nil {
		tcpResetConnectionLocked(ep, err)
	}
	switch st := ep.EndpointState(); {
	case err != nil || st == tcp.StateClose:
		ep.ResumeWork() // the endpoint is closed: nothing to hand on
		tcpDrainClosingSegmentQueue(ep)
		(*waiter.Queue)(field(ep, ackInternals.waiterQueue)).Notify(waiter.EventHUp | waiter.EventErr | waiter.ReadableEvents | waiter.WritableEvents)
		return false
	case st == tcp.StateTimeWait:
		tcpStartTimeWait(ep)
	}
	unlockEndpoint(ep)
	return owed
}

// unlockEndpoint releases ep's lock taken with TryLock, waking a processor
// if segments were queued meanwhile (the dispatcher only queues them while
// the lock is held).
// +checklocksignore: the lock was taken by TryLock, which checklocks cannot follow.
func unlockEndpoint(ep *tcp.Endpoint) {
	tcpOwnedByUser(ep).Store(1)
	ep.UnlockUser()
}

// tcpSettleACK sends ep's owed ACK if nothing carried it yet (sent), or
// reports ep busy (!ok: try again later).
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func tcpSettleACK(ep *tcp.Endpoint) (sent, ok bool) {
	if !ep.TryLock() {
		return false, false
	}
	if syncState(ep.EndpointState()) && tcpUnacked(ep) > 0 {
		tcpSendAck(tcpSender(ep))
		sent = true
	}
	unlockEndpoint(ep)
	return sent, true
}

// tcpACKOwed reports whether ep has received bytes it has not acknowledged,
// reporting false too when ep is busy.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func tcpACKOwed(ep *tcp.Endpoint) (owed, ok bool) {
	if !ep.TryLock() {
		return false, false
	}
	owed = syncState(ep.EndpointState()) && tcpUnacked(ep) > 0
	unlockEndpoint(ep)
	return owed, true
}
