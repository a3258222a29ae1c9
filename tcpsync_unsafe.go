package tickwire

import (
	"reflect"
	"unsafe"

	"gvisor.dev/gvisor/pkg/atomicbitops"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// netstack offers no way to process an inbound TCP segment on the goroutine
// that delivers it: its dispatcher always queues the endpoint to a processor
// goroutine, unless a user goroutine owns the endpoint, in which case the
// segment waits in the endpoint's queue until UnlockUser. Latency mode needs
// three pieces of the tcp package that it does not export; they are reached
// here, against the gVisor version go.mod pins, and checked when the package
// loads: if the endpoint's layout is not the expected one, tcpInternals.ok is
// false and latency mode leaves TCP to netstack's processors (the rest of
// latency mode still applies). TestTCPInternalsFound fails in that case, so
// an upgrade cannot silently turn the synchronous path off.

// tcpHandleConnected is what a processor goroutine runs for an endpoint in a
// connected state: it takes the endpoint's lock if free (TryLock), processes
// up to 100 queued segments, sends what they call for (ACKs, data the window
// now allows), and handles resets, FIN and TIME-WAIT.
//
//go:linkname tcpHandleConnected gvisor.dev/gvisor/pkg/tcpip/transport/tcp.handleConnected
func tcpHandleConnected(ep *tcp.Endpoint)

// tcpSegmentQueueEmpty reports whether an endpoint's segment queue is empty,
// under the queue's own mutex.
//
//go:linkname tcpSegmentQueueEmpty gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*segmentQueue).empty
func tcpSegmentQueueEmpty(q unsafe.Pointer) bool

// tcpInternals holds the offsets of the tcp.Endpoint fields latency mode
// touches.
var tcpInternals = findTCPInternals()

type tcpFieldOffsets struct {
	ok           bool
	ownedByUser  uintptr // atomicbitops.Uint32: 1 while a user goroutine holds the endpoint
	segmentQueue uintptr // segmentQueue: inbound segments waiting for processing
}

func findTCPInternals() tcpFieldOffsets {
	t := reflect.TypeFor[tcp.Endpoint]()
	owned, ok1 := t.FieldByName("ownedByUser")
	queue, ok2 := t.FieldByName("segmentQueue")
	if !ok1 || !ok2 || len(owned.Index) != 1 || len(queue.Index) != 1 {
		return tcpFieldOffsets{}
	}
	if owned.Type != reflect.TypeFor[atomicbitops.Uint32]() ||
		queue.Type.Name() != "segmentQueue" || queue.Type.PkgPath() != t.PkgPath() {
		return tcpFieldOffsets{}
	}
	return tcpFieldOffsets{ok: true, ownedByUser: owned.Offset, segmentQueue: queue.Offset}
}

// tcpOwnedByUser returns the endpoint's "held by a user goroutine" flag.
// Setting it while holding the endpoint's lock makes netstack's dispatcher
// only queue inbound segments, without waking a processor.
func tcpOwnedByUser(ep *tcp.Endpoint) *atomicbitops.Uint32 {
	return (*atomicbitops.Uint32)(unsafe.Add(unsafe.Pointer(ep), tcpInternals.ownedByUser))
}

// tcpQueueEmpty reports whether ep has no segment waiting for processing.
func tcpQueueEmpty(ep *tcp.Endpoint) bool {
	return tcpSegmentQueueEmpty(unsafe.Add(unsafe.Pointer(ep), tcpInternals.segmentQueue))
}
