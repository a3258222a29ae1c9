package mirror_test

import (
	"encoding/binary"
	"encoding/json"
	"expvar"
	"fmt"

	"github.com/tickwire/tickwire/mirror"
)

// printer prints what the Assembler reports.
type printer struct{}

func (printer) FlowStart(k mirror.FlowKey, ts int64) { fmt.Println("start", k) }
func (printer) Data(k mirror.FlowKey, off uint64, data []byte, ts int64) {
	fmt.Printf("data  %d %q\n", off, data)
}
func (printer) Gap(k mirror.FlowKey, off, n uint64, ts int64) { fmt.Println("gap  ", off, n) }
func (printer) FlowEnd(k mirror.FlowKey, r mirror.EndReason, ts int64) {
	fmt.Println("end  ", r)
}

// tcpPacket builds an IPv4 TCP packet from 192.0.2.1:5000 to 192.0.2.2:6000.
func tcpPacket(seq uint32, flags byte, payload string) []byte {
	p := make([]byte, 40+len(payload))
	p[0], p[8], p[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	copy(p[12:], []byte{192, 0, 2, 1, 192, 0, 2, 2})
	binary.BigEndian.PutUint16(p[20:], 5000)
	binary.BigEndian.PutUint16(p[22:], 6000)
	binary.BigEndian.PutUint32(p[24:], seq)
	p[32], p[33] = 5<<4, flags
	copy(p[40:], payload)
	return p
}

func Example() {
	// Checksums are left empty in this example, so they are not checked.
	a, err := mirror.New(mirror.Config{Checksum: mirror.ChecksumIgnore}, printer{})
	if err != nil {
		panic(err)
	}
	const ms = 1_000_000
	a.HandleIPv4(tcpPacket(100, 0x02, ""), 0*ms)       // SYN: offset 0 is sequence 101
	a.HandleIPv4(tcpPacket(101, 0x10, "hello "), 1*ms) // in order: delivered at once
	a.HandleIPv4(tcpPacket(113, 0x10, "!"), 2*ms)      // out of order: held
	a.HandleIPv4(tcpPacket(107, 0x10, "world"), 3*ms)  // fills the hole in part
	a.HandleIPv4(tcpPacket(120, 0x10, "again"), 4*ms)  // another hole before it
	a.HandleIPv4(tcpPacket(101, 0x10, "HELLO "), 5*ms) // retransmission: first copy won
	a.Flush(200 * ms)                                  // HoleTimeout (100 ms) skips the hole
	a.HandleIPv4(tcpPacket(125, 0x11, ""), 201*ms)     // FIN
	st := a.Stats()
	fmt.Println(st.DeliveredBytes, "bytes,", st.Gaps, "gap,", st.Duplicates, "duplicate")
	// Output:
	// start 192.0.2.1:5000->192.0.2.2:6000
	// data  0 "hello "
	// data  6 "world"
	// gap   11 1
	// data  12 "!"
	// gap   13 6
	// data  19 "again"
	// end   fin
	// 17 bytes, 2 gap, 1 duplicate
}

// Publishing an Assembler's counters with expvar: the goroutine that owns
// the Assembler copies them into a StatsVar, which expvar reads on its own.
func ExampleStatsVar() {
	a, err := mirror.New(mirror.Config{Checksum: mirror.ChecksumIgnore}, printer{})
	if err != nil {
		panic(err)
	}
	v := new(mirror.StatsVar)
	expvar.Publish("mirror-example", v)
	a.HandleIPv4(tcpPacket(100, 0x02, ""), 0)
	a.HandleIPv4(tcpPacket(101, 0x10, "hi"), 1)
	v.Set(a.Stats()) // after each batch of frames

	var st mirror.Stats
	if err := json.Unmarshal([]byte(expvar.Get("mirror-example").String()), &st); err != nil {
		panic(err)
	}
	fmt.Println(st.Frames, "frames,", st.DeliveredBytes, "bytes")
	// Output:
	// start 192.0.2.1:5000->192.0.2.2:6000
	// data  0 "hi"
	// 2 frames, 2 bytes
}

// One Assembler per receive queue, each on its own goroutine, bounded
// together by a Budget: 1,024 flow directions and 48 MiB of reassembly
// buffers for the source as a whole, whichever queues RSS fills.
func ExampleBudget() {
	budget, err := mirror.NewBudget(1024, 48<<20)
	if err != nil {
		panic(err)
	}
	queues := make([]*mirror.Assembler, 4)
	for i := range queues {
		queues[i], err = mirror.New(mirror.Config{
			MaxFlows: budget.MaxFlows(), MaxBufferTotal: budget.MaxBufferTotal(),
			Budget: budget, Checksum: mirror.ChecksumIgnore,
		}, printer{})
		if err != nil {
			panic(err)
		}
	}
	queues[2].HandleIPv4(tcpPacket(100, 0x02, ""), 0) // the SYN of a flow RSS put on queue 2
	fmt.Println(budget.Flows(), "of", budget.MaxFlows(), "flow directions tracked")
	for _, a := range queues {
		a.Close()
	}
	fmt.Println(budget.Flows(), "after Close")
	// Output:
	// start 192.0.2.1:5000->192.0.2.2:6000
	// 1 of 1024 flow directions tracked
	// end   close
	// 0 after Close
}
