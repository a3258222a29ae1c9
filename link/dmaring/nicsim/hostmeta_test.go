package nicsim

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/frame"
)

// newHostDevice is an endpoint and a device serving it with no wire.
func newHostDevice(t *testing.T, cfg dmaring.Config) (*dmaring.Endpoint, *Device) {
	t.Helper()
	cfg.InMemory = true
	ep, err := dmaring.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := New(Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dev.Close()
		ep.Close()
	})
	return ep, dev
}

// TestHostReadsRSSHash: the frames of Microsoft's verification flows,
// received by the device under its default RSS, reach the host on the queue
// the hash picks, carrying the hash and hash type of the published table,
// through ReadFrames and BorrowFrames alike.
func TestHostReadsRSSHash(t *testing.T) {
	const queues = 4
	ep, dev := newHostDevice(t, dmaring.Config{Queues: queues, RingLog: 4})
	batch := frame.NewBatch(2, 2048)
	borrowed := make([]frame.Frame, 2)
	read := func(q int, borrow bool) frame.Frame {
		t.Helper()
		rq := ep.RxQueue(q)
		if borrow {
			n, err := rq.BorrowFrames(borrowed)
			if err != nil || n != 1 {
				t.Fatalf("queue %d: BorrowFrames %d, %v", q, n, err)
			}
			f := borrowed[0]
			rq.ReleaseBorrowed()
			return f
		}
		n, err := rq.ReadFrames(batch)
		if err != nil || n != 1 {
			t.Fatalf("queue %d: ReadFrames %d, %v", q, n, err)
		}
		return batch[0]
	}
	for _, v := range msVectors {
		for _, borrow := range []bool{false, true} {
			f := buildFrame(frameSpec{proto: protoTCP, src: v.src, dst: v.dst, sport: v.srcPort, dport: v.dstPort})
			if err := dev.Receive(f, 0); err != nil {
				t.Fatal(err)
			}
			got := read(int(v.ipv4TCP%queues), borrow)
			if got.Hash != v.ipv4TCP || got.HashType != dmaring.HashTypeIPv4|dmaring.HashTypeTCP {
				t.Errorf("TCP %s:%d -> %s:%d (borrow %v): hash %#08x type %#x, want %#08x %#x", v.src, v.srcPort,
					v.dst, v.dstPort, borrow, got.Hash, got.HashType, v.ipv4TCP, dmaring.HashTypeIPv4|dmaring.HashTypeTCP)
			}
			f = buildFrame(frameSpec{proto: 1, src: v.src, dst: v.dst}) // ICMP: addresses only
			if err := dev.Receive(f, 0); err != nil {
				t.Fatal(err)
			}
			got = read(int(v.ipv4%queues), borrow)
			if got.Hash != v.ipv4 || got.HashType != dmaring.HashTypeIPv4 {
				t.Errorf("ICMP %s -> %s (borrow %v): hash %#08x type %#x, want %#08x %#x", v.src, v.dst, borrow,
					got.Hash, got.HashType, v.ipv4, dmaring.HashTypeIPv4)
			}
		}
	}
	// Not hashed (ARP): type 0, hash 0, queue 0, even in a frame slot that
	// held a hash before.
	batch[0].Hash, batch[0].HashType = 1, 1
	if err := dev.Receive(buildFrame(frameSpec{etype: 0x0806}), 0); err != nil {
		t.Fatal(err)
	}
	if got := read(0, false); got.Hash != 0 || got.HashType != 0 {
		t.Errorf("unhashed frame: hash %#x type %#x", got.Hash, got.HashType)
	}
	v := msVectors[0]
	f := buildFrame(frameSpec{proto: protoTCP, src: v.src, dst: v.dst, sport: v.srcPort, dport: v.dstPort})
	q := ep.RxQueue(int(v.ipv4TCP % queues))
	if a := testing.AllocsPerRun(100, func() {
		dev.Receive(f, 0)
		if n, _ := q.ReadFrames(batch); n != 1 || batch[0].Hash != v.ipv4TCP {
			t.Fatal("no hashed frame")
		}
	}); a != 0 {
		t.Errorf("a hashed frame: %v allocations", a)
	}
}

// tcpFrame is an IPv4 TCP segment from src to dst with sequence number
// seq and payload bytes of payload.
func tcpFrame(src, dst netip.AddrPort, seq uint32, payload int) []byte {
	f := buildFrame(frameSpec{proto: protoTCP, src: src.Addr().String(), dst: dst.Addr().String(),
		sport: src.Port(), dport: dst.Port(), l4: 20 + payload})
	tcp := f[14+20:]
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	return f
}

// waitStamp polls TxStamps until it returns a stamp.
func waitStamp(t *testing.T, ep *dmaring.Endpoint, dst []dmaring.TxStamp) dmaring.TxStamp {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if n := ep.TxStamps(dst[:1]); n == 1 {
			return dst[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no TX stamp")
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// TestTxStampsWireTime: each frame sent comes back from TxStamps with the
// device clock's time of its last bit on the wire, in Unix nanoseconds,
// between the device clock's readings before the send and after the stamp
// (plus the frame's time on the link), and with its flow and sequence
// number.
func TestTxStampsWireTime(t *testing.T) {
	ep, dev := newHostDevice(t, dmaring.Config{RingLog: 4, TxStamps: true})
	src, dst := netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:9000")
	stamps := make([]dmaring.TxStamp, 4)
	for i := range 40 { // several laps of the 16-entry ring
		f := tcpFrame(src, dst, uint32(1000+100*i), 100)
		before := dev.Clock().Now()
		if err := ep.Send(0, f); err != nil {
			t.Fatal(err)
		}
		s := waitStamp(t, ep, stamps)
		after := dev.Clock().Now()
		if s.Time < before || s.Time > after+int64(Rate10G.FrameTime(len(f))) {
			t.Fatalf("frame %d: stamp %d outside the device clock's %d..%d", i, s.Time, before, after)
		}
		if d := time.Since(time.Unix(0, s.Time)); d < -time.Second || d > time.Minute {
			t.Fatalf("frame %d: stamp %v from the host's real time", i, d)
		}
		want := dmaring.TxStamp{Time: s.Time, Queue: 0, Len: len(f), Proto: 6, Src: src, Dst: dst, Seq: uint32(1000 + 100*i), Payload: 100}
		if s != want {
			t.Fatalf("frame %d: %+v, want %+v", i, s, want)
		}
	}
	// A descriptor the device refuses (no bytes) gives an error stamp.
	if err := ep.Send(0, nil); err != nil {
		t.Fatal(err)
	}
	if s := waitStamp(t, ep, stamps); !s.Err || s.Time != 0 || s.Len != 0 {
		t.Errorf("refused frame: %+v", s)
	}
	f := tcpFrame(src, dst, 1, 100)
	if a := testing.AllocsPerRun(100, func() {
		ep.Send(0, f)
		for ep.TxStamps(stamps) == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}); a != 0 {
		t.Errorf("Send and TxStamps: %v allocations per frame", a)
	}
}

// TestTxStampsKeepTheLast: a queue keeps the stamps of its last 2^RingLog
// frames for TxStamps and counts the older ones it dropped; without
// Config.TxStamps there are none.
func TestTxStampsKeepTheLast(t *testing.T) {
	ep, dev := newHostDevice(t, dmaring.Config{RingLog: 4, TxStamps: true})
	src, dst := netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:9000")
	const sent = 40
	for i := range sent {
		for ep.Send(0, tcpFrame(src, dst, uint32(i), 10)) != nil {
			time.Sleep(100 * time.Microsecond) // ring full: the device catches up
		}
	}
	for deadline := time.Now().Add(20 * time.Second); dev.Stats().TxFrames < sent; {
		if time.Now().After(deadline) {
			t.Fatal("frames not sent")
		}
		time.Sleep(time.Millisecond)
	}
	stamps := make([]dmaring.TxStamp, 64)
	n := ep.TxStamps(stamps)
	if n != 16 || ep.Stats().TxStampsLost != sent-16 {
		t.Fatalf("%d stamps, %d lost; want 16, %d", n, ep.Stats().TxStampsLost, sent-16)
	}
	for i, s := range stamps[:n] {
		if s.Seq != uint32(sent-16+i) || (i > 0 && s.Time < stamps[i-1].Time) {
			t.Fatalf("stamp %d: seq %d at %d, want the last 16 frames in order", i, s.Seq, s.Time)
		}
	}
	if n := ep.TxStamps(stamps); n != 0 {
		t.Errorf("%d stamps taken twice", n)
	}

	plain, _ := newHostDevice(t, dmaring.Config{RingLog: 4})
	plain.Send(0, tcpFrame(src, dst, 1, 10))
	time.Sleep(10 * time.Millisecond)
	if n := plain.TxStamps(stamps); n != 0 {
		t.Errorf("without Config.TxStamps: %d stamps", n)
	}
}
