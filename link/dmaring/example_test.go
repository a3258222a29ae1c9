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

// The wire time of each frame sent: with Config.TxStamps, TxStamps returns
// the device clock's stamp of every frame's TX completion (when its last
// bit left) with the frame's flow and TCP sequence number, to match against
// the orders sent on the connection.
func ExampleEndpoint_TxStamps() {
	ep, err := dmaring.New(dmaring.Config{InMemory: true, TxStamps: true})
	if err != nil {
		panic(err)
	}
	defer ep.Close()
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()

	// A TCP segment of 8 payload bytes at sequence number 5000, as the
	// stack would send an order.
	f := make([]byte, 14+20+20+8)
	f[12], f[13] = 0x08, 0x00 // IPv4
	ip := f[14:]
	ip[0], ip[3], ip[8], ip[9] = 0x45, byte(len(ip)), 64, 6
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	tcp := ip[20:]
	tcp[0], tcp[1], tcp[2], tcp[3] = 0x9c, 0x40, 0x23, 0x28 // ports 40000, 9000
	tcp[6], tcp[7], tcp[12] = 0x13, 0x88, 5<<4              // seq 5000, no options

	before := time.Now()
	if err := ep.Send(0, f); err != nil {
		panic(err)
	}
	stamps := make([]dmaring.TxStamp, 16)
	n := 0
	for n == 0 {
		n = ep.TxStamps(stamps) // polls the TX completions
	}
	s := stamps[0]
	fmt.Printf("%v -> %v seq %d, %d bytes\n", s.Src, s.Dst, s.Seq, s.Payload)
	fmt.Println("left after the send:", time.Unix(0, s.Time).After(before.Add(-time.Millisecond)))
	// Output:
	// 10.0.0.1:40000 -> 10.0.0.2:9000 seq 5000, 8 bytes
	// left after the send: true
}

// The RSS hash of a received frame: the device's Toeplitz hash of its flow,
// which also chose its queue.
func ExampleRxQueue_ReadFrames_hash() {
	ep, err := dmaring.New(dmaring.Config{InMemory: true, Queues: 4})
	if err != nil {
		panic(err)
	}
	defer ep.Close()
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()

	// Microsoft's first RSS verification flow, 66.9.149.187:2794 ->
	// 161.142.100.80:1766, under the default key.
	f := make([]byte, 14+20+20)
	f[12], f[13] = 0x08, 0x00
	ip := f[14:]
	ip[0], ip[3], ip[8], ip[9] = 0x45, 40, 64, 6
	copy(ip[12:], []byte{66, 9, 149, 187, 161, 142, 100, 80})
	ip[20], ip[21], ip[22], ip[23] = 0x0a, 0xea, 0x06, 0xe6
	if err := dev.Receive(f, 0); err != nil {
		panic(err)
	}
	const hash = 0x51ccc178
	batch := frame.NewBatch(1, 2048)
	q := ep.RxQueue(hash % 4) // the default indirection table spreads hashes evenly
	if _, err := q.ReadFrames(batch); err != nil {
		panic(err)
	}
	fmt.Printf("hash %#08x, TCP: %v\n", batch[0].Hash, batch[0].HashType&dmaring.HashTypeTCP != 0)
	// Output:
	// hash 0x51ccc178, TCP: true
}
