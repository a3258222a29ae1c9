package dmaring_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pipe"
)

// A stack on DMA rings, served by the software NIC, whose wire is a pipe to
// a second stack: the first pings the second.
func Example() {
	ep, err := dmaring.New(dmaring.Config{Queues: 2, InMemory: true}) // a memfd (the default) needs Linux
	if err != nil {
		panic(err)
	}
	a, b := pipe.New(pipe.Options{})
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: nicsim.NewPipeWire(a)})
	if err != nil {
		panic(err)
	}
	defer dev.Close() // after the stack, which closes ep
	s1, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer s1.Close()
	s2, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer s2.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s1.Ping(ctx, netip.MustParseAddr("10.0.0.2")); err != nil {
		panic(err)
	}
	fmt.Println("echo replies received:", s1.Stats().ICMPEchoRepliesRx)
	// The ring's counters follow the deliveries (the reply wakes Ping
	// first) and the TX completions: give them a moment.
	both := func() bool { st := ep.Stats(); return st.RxFrames >= 2 && st.TxFrames >= 2 }
	for end := time.Now().Add(5 * time.Second); !both() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("frames through the rings both ways:", both())
	// Output:
	// echo replies received: 1
	// frames through the rings both ways: true
}

// Reading frames in place from an RX ring: the frames alias the ring's
// buffers until ReleaseBorrowed gives them back to the device.
func ExampleRxQueue_BorrowFrames() {
	ep, err := dmaring.New(dmaring.Config{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer ep.Close()
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	for _, n := range []int{60, 1400} {
		dev.Receive(make([]byte, n), 0) // a frame from the wire
	}

	q := ep.RxQueue(0)
	frames := make([]frame.Frame, 8)
	n, err := q.BorrowFrames(frames)
	if err != nil {
		panic(err)
	}
	for _, f := range frames[:n] {
		fmt.Println(len(f.Data()), "bytes, stamped:", f.Time != 0)
	}
	q.ReleaseBorrowed() // frames[:n] must not be used from here on
	// Output:
	// 60 bytes, stamped: true
	// 1400 bytes, stamped: true
}
