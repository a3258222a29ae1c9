package pipe

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"gvisor.dev/gvisor/pkg/refs"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

func TestMain(m *testing.M) {
	refs.SetLeakMode(refs.LeaksPanic)
	code := m.Run()
	refs.DoLeakCheck()
	os.Exit(code)
}

// recorder is a NetworkDispatcher that records what it receives and can
// answer from inside the delivery, as a stack does.
type recorder struct {
	mu sync.Mutex
	// +checklocks:mu
	protos []tcpip.NetworkProtocolNumber
	// +checklocks:mu
	frames [][]byte
	// +checklocks:mu
	types []tcpip.PacketType
	// +checklocks:mu
	onRecv func(payload []byte)
}

func (r *recorder) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	v := pkt.Data().ToBuffer()
	payload := v.Flatten()
	v.Release()
	r.mu.Lock()
	r.protos = append(r.protos, proto)
	r.frames = append(r.frames, payload)
	r.types = append(r.types, pkt.PktType)
	fn := r.onRecv
	r.mu.Unlock()
	if fn != nil {
		fn(payload)
	}
}

func (r *recorder) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

func frame(dst, src []byte, etherType uint16, payload string) []byte {
	f := make([]byte, header.EthernetMinimumSize, header.EthernetMinimumSize+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{DstAddr: tcpip.LinkAddress(dst), SrcAddr: tcpip.LinkAddress(src), Type: tcpip.NetworkProtocolNumber(etherType)})
	return append(f, payload...)
}

// writePacket sends payload from e through WritePackets, as a stack would.
func writePacket(e *Endpoint, dst tcpip.LinkAddress, payload string) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(e.MaxHeaderLength()),
		Payload:            bufferOf(payload),
	})
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = e.LinkAddress()
	pkt.EgressRoute.RemoteLinkAddress = dst
	e.AddHeader(pkt)
	var list stack.PacketBufferList
	list.PushBack(pkt)
	if n, err := e.WritePackets(list); n != 1 || err != nil {
		panic("WritePackets failed")
	}
	list.Reset()
}

func TestDeliveryBothWays(t *testing.T) {
	a, b := New(Options{})
	var ra, rb recorder
	a.Attach(&ra)
	b.Attach(&rb)
	writePacket(a, b.LinkAddress(), "to b")
	writePacket(b, a.LinkAddress(), "to a")
	writePacket(a, "\xff\xff\xff\xff\xff\xff", "broadcast")
	writePacket(a, "\x02\x00\x00\x00\x00\x99", "someone else")
	if rb.count() != 3 || ra.count() != 1 {
		t.Fatalf("b got %d, a got %d; want 3, 1", rb.count(), ra.count())
	}
	if string(rb.frames[0]) != "to b" || rb.protos[0] != header.IPv4ProtocolNumber || rb.types[0] != tcpip.PacketHost {
		t.Errorf("b's first frame: %q proto %d type %d", rb.frames[0], rb.protos[0], rb.types[0])
	}
	if rb.types[1] != tcpip.PacketBroadcast || rb.types[2] != tcpip.PacketOtherHost {
		t.Errorf("packet types %v", rb.types)
	}
	if st := a.Stats(); st.Sent != 3 || st.Delivered != 3 || st.Dropped != 0 {
		t.Errorf("a stats %+v", st)
	}
	a.Close()
	b.Close()
}

// TestReplyFromInsideDelivery answers every frame from inside its delivery,
// ten rounds deep: the pipe must neither deadlock nor recurse without bound.
func TestReplyFromInsideDelivery(t *testing.T) {
	a, b := New(Options{})
	var ra, rb recorder
	rounds := 0
	rb.onRecv = func([]byte) { writePacket(b, a.LinkAddress(), "pong") }
	ra.onRecv = func([]byte) {
		if rounds++; rounds < 10 {
			writePacket(a, b.LinkAddress(), "ping")
		}
	}
	a.Attach(&ra)
	b.Attach(&rb)
	writePacket(a, b.LinkAddress(), "ping")
	if ra.count() != 10 || rb.count() != 10 {
		t.Fatalf("a got %d pongs, b got %d pings; want 10 each", ra.count(), rb.count())
	}
	if a.Stats().Queued == 0 {
		t.Error("a reply in the busy direction should have been queued, not delivered recursively")
	}
	a.Close()
	b.Close()
}

// TestNotifyTxBacklog: a request made while frames wait is answered once,
// by the delivery that brings the backlog down to its bound; a request made
// when the backlog is that low already is refused and never answered.
func TestNotifyTxBacklog(t *testing.T) {
	a, b := New(Options{QueueLen: 8})
	defer b.Close()
	defer a.Close()
	if n := a.TxQueueLen(); n != 8 {
		t.Errorf("TxQueueLen = %d, want Options.QueueLen 8", n)
	}
	var rb recorder
	release, entered := make(chan struct{}), make(chan struct{})
	first := true
	rb.onRecv = func([]byte) {
		if first {
			first = false
			close(entered)
			<-release // hold the direction busy
		}
	}
	b.Attach(&rb)
	done := make(chan struct{})
	go func() {
		writePacket(a, b.LinkAddress(), "0")
		close(done)
	}()
	// Until frame 0 is in the dispatcher (not merely counted sent), a
	// write below could find the direction idle and deliver itself, and
	// wait in onRecv for the release this goroutine would never give.
	<-entered
	for i := 1; i <= 5; i++ {
		writePacket(a, b.LinkAddress(), string(rune('0'+i)))
	}
	var calls, at atomic.Int64
	if !a.NotifyTxBacklog(2, func() { calls.Add(1); at.Store(int64(a.TxBacklog())) }) {
		t.Fatal("NotifyTxBacklog(2) with 6 frames in the backlog = false, want true")
	}
	if calls.Load() != 0 {
		t.Fatal("notified before any frame was delivered")
	}
	close(release)
	<-done
	if calls.Load() != 1 || at.Load() != 2 {
		t.Errorf("notified %d times, at a backlog of %d; want once, at 2", calls.Load(), at.Load())
	}
	if a.NotifyTxBacklog(2, func() { t.Error("notified for a request refused") }) {
		t.Error("NotifyTxBacklog(2) with an empty backlog = true, want false")
	}
	writePacket(a, b.LinkAddress(), "6") // delivered inline: must not call the refused request
}

// TestQueueOverflow fills the queue while a delivery is in progress: the
// excess is dropped and counted, and queued frames keep their order.
func TestQueueOverflow(t *testing.T) {
	a, b := New(Options{QueueLen: 4})
	var rb recorder
	release, entered := make(chan struct{}), make(chan struct{})
	first := true
	rb.onRecv = func([]byte) {
		if first {
			first = false
			close(entered)
			<-release // hold the direction busy
		}
	}
	b.Attach(&rb)
	done := make(chan struct{})
	go func() {
		writePacket(a, b.LinkAddress(), "0")
		close(done)
	}()
	// Until frame 0 is in the dispatcher (not merely counted sent), a
	// write below could find the direction idle and deliver itself, and
	// wait in onRecv for the release this goroutine would never give.
	<-entered
	for i := 1; i <= 6; i++ {
		writePacket(a, b.LinkAddress(), string(rune('0'+i)))
	}
	if n := a.TxBacklog(); n != 5 {
		t.Errorf("TxBacklog = %d while one frame is delivered and 4 wait, want 5", n)
	}
	close(release)
	<-done
	if n := a.TxBacklog(); n != 0 {
		t.Errorf("TxBacklog = %d after the deliveries, want 0", n)
	}
	got := bytes.Join(rb.frames, nil)
	if string(got) != "01234" {
		t.Errorf("delivered %q, want \"01234\"", got)
	}
	if st := a.Stats(); st.Dropped != 2 || st.Queued != 4 || st.Delivered != 5 {
		t.Errorf("stats %+v, want 2 dropped, 4 queued, 5 delivered", st)
	}
	a.Close()
	b.Close()
}

func TestSendChecksLength(t *testing.T) {
	a, b := New(Options{MTU: 100})
	var rb recorder
	b.Attach(&rb)
	if err := a.Send(make([]byte, 13)); err != ErrBadFrame {
		t.Errorf("short frame: %v", err)
	}
	if err := a.Send(make([]byte, 115)); err != ErrBadFrame {
		t.Errorf("long frame: %v", err)
	}
	if err := a.Send(frame(b.MAC(), a.MAC(), 0x0800, "ok")); err != nil || rb.count() != 1 {
		t.Errorf("good frame: %v, %d delivered", err, rb.count())
	}
	b.Attach(nil)
	a.Send(frame(b.MAC(), a.MAC(), 0x0800, "nobody"))
	if st := a.Stats(); st.Dropped != 1 {
		t.Errorf("frame to a detached end: %+v", st)
	}
	a.Close()
	b.Close()
}

func TestSniffer(t *testing.T) {
	a, b := New(Options{})
	var rb recorder
	b.Attach(&rb)
	var seen [][]byte
	a.SetSniffer(func(f []byte) { seen = append(seen, append([]byte(nil), f...)) })
	writePacket(a, b.LinkAddress(), "sniffed")
	a.SetSniffer(nil)
	writePacket(a, b.LinkAddress(), "not sniffed")
	if len(seen) != 1 || string(seen[0][header.EthernetMinimumSize:]) != "sniffed" ||
		header.Ethernet(seen[0]).SourceAddress() != a.LinkAddress() {
		t.Errorf("sniffer saw %q", seen)
	}
	a.Close()
	b.Close()
}

// TestWriteDoesNotAllocate asserts that a frame crossing the pipe costs no
// allocation beyond building the packet, which is netstack's (measured
// alone as the baseline).
func TestWriteDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	a, b := New(Options{})
	var sink countDispatcher
	b.Attach(&sink)
	payload := bufferOf("0123456789012345678901234567890123456789012345678901234567890123")
	var list stack.PacketBufferList
	build := func() *stack.PacketBuffer {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize, Payload: payload.Clone()})
		pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
		pkt.EgressRoute.RemoteLinkAddress = b.LinkAddress()
		a.AddHeader(pkt)
		return pkt
	}
	baseline := testing.AllocsPerRun(1000, func() {
		build().DecRef()
	})
	allocs := testing.AllocsPerRun(1000, func() {
		list.PushBack(build())
		a.WritePackets(list)
		list.Reset()
	})
	payload.Release()
	if allocs-baseline > 0 || sink.n == 0 {
		t.Errorf("%.1f allocations per frame over a baseline of %.1f (%d delivered), want 0", allocs, baseline, sink.n)
	}
	a.Close()
	b.Close()
}

type countDispatcher struct{ n int }

func (c *countDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	c.n++
}
func (c *countDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestNoCopy checks that the receiver's packet shares the sender's payload
// memory instead of a copy.
func TestNoCopy(t *testing.T) {
	a, b := New(Options{})
	var seen [][]byte
	var sink sliceDispatcher
	sink.fn = func(pkt *stack.PacketBuffer) { seen = pkt.AsSlices() }
	b.Attach(&sink)
	payload := bufferOf("a payload that must not be copied")
	views := payload.AsViewList()
	sent := views.Front().AsSlice()
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize, Payload: payload})
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.EgressRoute.RemoteLinkAddress = b.LinkAddress()
	a.AddHeader(pkt)
	var list stack.PacketBufferList
	list.PushBack(pkt)
	a.WritePackets(list)
	list.Reset()
	shared := false
	for _, s := range seen {
		if len(s) > 0 && &s[0] == &sent[0] {
			shared = true
		}
	}
	if !shared {
		t.Error("the receiver got a copy of the payload")
	}
	a.Close()
	b.Close()
}

type sliceDispatcher struct{ fn func(*stack.PacketBuffer) }

func (d *sliceDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	d.fn(pkt)
}
func (d *sliceDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}
