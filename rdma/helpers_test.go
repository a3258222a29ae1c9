package rdma

import (
	"context"
	"encoding/binary"
	"math/rand"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/leakcheck"
	"github.com/tickwire/tickwire/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// faults is what a lossyLink does to RoCEv2 packets, each a probability.
type faults struct {
	drop, dup, reorder float64
}

// lossyLink wraps a pipe end and, for the UDP datagrams to port 4791 it
// sends, drops some, sends some twice, and holds some back until after the
// next one (a reordering), at random from a fixed seed.
type lossyLink struct {
	*pipe.Endpoint
	f faults

	mu sync.Mutex
	// +checklocks:mu
	rng *rand.Rand
	// +checklocks:mu
	held *gstack.PacketBuffer
	// +checklocks:mu
	dropped, duped, reordered int
}

func newLossyLink(e *pipe.Endpoint, f faults, seed int64) *lossyLink {
	return &lossyLink{Endpoint: e, f: f, rng: rand.New(rand.NewSource(seed))}
}

func isRoCE(pkt *gstack.PacketBuffer) bool {
	if pkt.TransportProtocolNumber != header.UDPProtocolNumber {
		return false
	}
	u := pkt.TransportHeader().Slice()
	return len(u) >= 4 && binary.BigEndian.Uint16(u[2:]) == UDPPort
}

// WritePackets implements stack.LinkEndpoint.WritePackets. It does NOT take
// ownership of pkts.
func (l *lossyLink) WritePackets(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	if l.f == (faults{}) {
		return l.Endpoint.WritePackets(pkts)
	}
	var keep gstack.PacketBufferList
	l.mu.Lock()
	for _, pkt := range pkts.AsSlice() {
		if !isRoCE(pkt) {
			keep.PushBack(pkt.IncRef())
			continue
		}
		r := l.rng.Float64()
		switch {
		case r < l.f.drop:
			l.dropped++
			continue
		case r < l.f.drop+l.f.dup:
			l.duped++
			keep.PushBack(pkt.IncRef())
			keep.PushBack(pkt.IncRef())
		case r < l.f.drop+l.f.dup+l.f.reorder && l.held == nil:
			l.reordered++
			l.held = pkt.IncRef()
			continue
		default:
			keep.PushBack(pkt.IncRef())
		}
		if l.held != nil {
			keep.PushBack(l.held)
			l.held = nil
		}
	}
	l.mu.Unlock()
	l.Endpoint.WritePackets(keep)
	keep.Reset()
	return pkts.Len(), nil
}

// release drops a packet still held back.
func (l *lossyLink) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		l.held.DecRef()
		l.held = nil
	}
}

// testTimeout is the local ACK timeout of the tests' queue pairs: long
// enough that a goroutine starved on a loaded machine (2 cores, parallel
// tests, -race) is not taken for 7 losses in a row.
const testTimeout = 25 * time.Millisecond

// pair is two connected queue pairs on two stacks joined by link/pipe.
type pair struct {
	sa, sb   *tickwire.Stack
	da, db   *Device
	qa, qb   *QP
	cqa, cqb *CQ
	la, lb   *lossyLink
}

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

// newPair connects QP a (on 10.0.0.1) to QP b (10.0.0.2) at path MTU mtu
// over a pipe with faults f in both directions.
func newPair(t testing.TB, mtu int, f faults) *pair {
	t.Helper()
	a, b := pipe.New(pipe.Options{MTU: 9000, QueueLen: 4096})
	p := &pair{la: newLossyLink(a, f, 1), lb: newLossyLink(b, f, 2)}
	var err error
	p.sa, err = tickwire.New(tickwire.Config{Link: p.la, MAC: a.MAC(), Addr: netip.PrefixFrom(addrA, 24), MTU: 9000, UDPReceiveQueue: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p.sb, err = tickwire.New(tickwire.Config{Link: p.lb, MAC: b.MAC(), Addr: netip.PrefixFrom(addrB, 24), MTU: 9000, UDPReceiveQueue: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.da.Close()
		p.db.Close()
		p.sa.Close()
		p.sb.Close()
		p.la.release()
		p.lb.release()
	})
	if p.da, err = Open(p.sa); err != nil {
		t.Fatal(err)
	}
	if p.db, err = Open(p.sb); err != nil {
		t.Fatal(err)
	}
	p.cqa, _ = NewCQ(4096)
	p.cqb, _ = NewCQ(4096)
	if p.qa, err = p.da.CreateQP(QPConfig{SendCQ: p.cqa, RecvCQ: p.cqa, SendQueue: 1024, RecvQueue: 1024}); err != nil {
		t.Fatal(err)
	}
	if p.qb, err = p.db.CreateQP(QPConfig{SendCQ: p.cqb, RecvCQ: p.cqb, SendQueue: 1024, RecvQueue: 1024}); err != nil {
		t.Fatal(err)
	}
	// Warm the ARP caches, so that no packet waits for a resolution.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.sa.Ping(ctx, addrB); err != nil {
		t.Fatal(err)
	}
	timeout := testTimeout
	if err := p.qa.Connect(QPAttrs{PeerAddr: addrB, PeerQPN: p.qb.QPN(), RecvPSN: 0xfffff0, SendPSN: 0xffff00,
		PathMTU: mtu, Timeout: timeout, MinRNRTimer: 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.qb.Connect(QPAttrs{PeerAddr: addrA, PeerQPN: p.qa.QPN(), RecvPSN: 0xffff00, SendPSN: 0xfffff0,
		PathMTU: mtu, Timeout: timeout, MinRNRTimer: 1}); err != nil {
		t.Fatal(err)
	}
	return p
}

// wait collects n completions from cq within a generous time.
func wait(t testing.TB, cq *CQ, n int) []Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([]Completion, 0, n)
	buf := make([]Completion, 64)
	for len(out) < n {
		k, err := cq.Wait(ctx, buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("%d of %d completions: %v", len(out), n, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}
