package link_test

import (
	"fmt"
	"io"
	"time"

	"github.com/tickwire/tickwire/link"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/pipe"
)

// The Stack looks for the optional features with type assertions; a link
// offers those it has (link/pipe counts the frames with a wrong checksum
// that Send drops, and has no reader to poll or lock), and a wrapper (the
// pcap recorder) offers them all, passing them on to the link it wraps.
func Example() {
	a, _ := pipe.New(pipe.Options{})
	rec, err := recorder.New(a, io.Discard)
	if err != nil {
		panic(err)
	}
	defer rec.Close()
	for _, l := range []any{a, rec} {
		_, busy := l.(link.BusyPoller)
		_, drops := l.(link.ChecksumDropCounter)
		_, locks := l.(link.ThreadLocker)
		fmt.Printf("%T: BusyPoller %v, ChecksumDropCounter %v, ThreadLocker %v\n", l, busy, drops, locks)
	}
	rec.SetBusyPoll(20 * time.Microsecond) // a no-op: the pipe does not poll
	rec.SetLockOSThread(true)              // a no-op: the pipe has no reader goroutine
	// Output:
	// *pipe.Endpoint: BusyPoller false, ChecksumDropCounter true, ThreadLocker false
	// *recorder.Endpoint: BusyPoller true, ChecksumDropCounter true, ThreadLocker true
}
