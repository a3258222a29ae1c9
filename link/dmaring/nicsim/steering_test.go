package nicsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/tickwire/tickwire/link/dmaring"
)

// rxCompletion is what a test reads back from an RX completion.
type rxCompletion struct {
	hash, hashType uint32
	length         int
}

// readRXCompletions returns the completions the device wrote to RX queue
// q's completion queue that the host has not consumed: the test never
// attaches the endpoint, so nothing else reads them.
func readRXCompletions(t *testing.T, r *dmaring.Region, q int) []rxCompletion {
	t.Helper()
	cq := r.Regs(dmaring.KindCQ, 2*q+1)
	size := uint32(1) << cq.LogSize()
	var out []rxCompletion
	for i := uint32(0); ; i++ {
		if i == size {
			t.Fatalf("RX queue %d: completion queue full", q)
		}
		off := int(cq.Base()) + int(i)*dmaring.CplSize
		if !dmaring.EntryIsNew(r.Load32(off+dmaring.CplPhase), i, size) {
			return out
		}
		b := r.Bytes()[off : off+dmaring.CplSize]
		if s := dmaring.ErrCode(b[dmaring.CplStatus]); s != dmaring.ErrNone {
			t.Fatalf("RX queue %d completion %d: status %v", q, i, s)
		}
		out = append(out, rxCompletion{
			hash:     binary.LittleEndian.Uint32(b[dmaring.CplRxHash:]),
			hashType: uint32(b[dmaring.CplHashType]),
			length:   int(binary.LittleEndian.Uint16(b[dmaring.CplLen:])),
		})
	}
}

// TestReceiveSteersFlowsByRSS: frames of many IPv4 TCP and UDP flows,
// received over 4 queues with the default RSS: each flow always lands on
// one queue, every completion's hash is the
// Toeplitz hash of the flow's tuple under DefaultRSSKey with the right hash
// type, and every queue gets some flows.
func TestReceiveSteersFlowsByRSS(t *testing.T) {
	const queues, flows, perFlow = 4, 48, 3
	ep, err := dmaring.New(dmaring.Config{Queues: queues, RingLog: 9, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	d, err := New(Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	type want struct {
		hash, hashType uint32
		length         int
		flow           int
	}
	sent := make([][]want, queues) // per queue, in order
	flowQueue := map[int]int{}
	for round := range perFlow {
		for f := range flows {
			s := frameSpec{
				proto: protoTCP,
				src:   fmt.Sprintf("192.0.2.%d", 1+f%7),
				dst:   fmt.Sprintf("198.51.100.%d", 1+f/7),
				sport: uint16(1024 + 37*f),
				dport: uint16(80 + f%3),
			}
			ht := uint32(HashTypeIPv4 | HashTypeTCP)
			if f%2 == 1 {
				s.proto, ht = protoUDP, HashTypeIPv4|HashTypeUDP
			}
			frame := buildFrame(s)
			if err := d.Receive(frame, 0); err != nil {
				t.Fatalf("round %d flow %d: %v", round, f, err)
			}
			var tuple [12]byte
			copy(tuple[:], frame[ethHeaderLen+ipv4SrcOffset:ethHeaderLen+ipv4SrcOffset+8])
			copy(tuple[8:], frame[ethHeaderLen+ipv4MinHeaderLen:ethHeaderLen+ipv4MinHeaderLen+4])
			h := slowToeplitz(DefaultRSSKey[:], tuple[:])
			q := int(h % DefaultRSSTableSize % queues) // the default table: entry i is queue i mod queues
			if prev, ok := flowQueue[f]; ok && prev != q {
				t.Fatalf("flow %d: queue %d, earlier %d", f, q, prev)
			}
			flowQueue[f] = q
			sent[q] = append(sent[q], want{hash: h, hashType: ht, length: len(frame), flow: f})
		}
	}
	for q := range queues {
		got := readRXCompletions(t, ep.Region(), q)
		if len(got) != len(sent[q]) {
			t.Fatalf("queue %d: %d completions, want %d", q, len(got), len(sent[q]))
		}
		if len(got) == 0 {
			t.Errorf("queue %d got no flow", q)
		}
		for i, c := range got {
			w := sent[q][i]
			if c.hash != w.hash || c.hashType != w.hashType || c.length != w.length {
				t.Errorf("queue %d completion %d (flow %d): hash %#x type %#x len %d, want %#x %#x %d",
					q, i, w.flow, c.hash, c.hashType, c.length, w.hash, w.hashType, w.length)
			}
		}
	}
	if st := d.Stats(); st.RxFrames != flows*perFlow || st.Errors != 0 {
		t.Errorf("stats %+v, want %d frames and no errors", st, flows*perFlow)
	}
}

// TestReceiveUnhashedAndReceiveOn: a frame RSS does not hash goes to queue 0
// with hash and type 0, and ReceiveOn bypasses RSS.
func TestReceiveUnhashedAndReceiveOn(t *testing.T) {
	ep, err := dmaring.New(dmaring.Config{Queues: 2, RingLog: 4, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	d, err := New(Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	arp := buildFrame(frameSpec{etype: 0x0806})
	if err := d.Receive(arp, 0); err != nil {
		t.Fatal(err)
	}
	tcp := buildFrame(frameSpec{proto: protoTCP, sport: 1, dport: 2})
	if err := d.ReceiveOn(1, tcp, 0); err != nil {
		t.Fatal(err)
	}
	for q, wantLen := range []int{len(arp), len(tcp)} {
		got := readRXCompletions(t, ep.Region(), q)
		if len(got) != 1 || got[0] != (rxCompletion{length: wantLen}) {
			t.Errorf("queue %d: completions %+v, want one of length %d with hash and type 0", q, got, wantLen)
		}
	}
}

// TestNewRefusesRSSWithMoreQueues: an RSS whose table names a queue the
// region does not have is refused.
func TestNewRefusesRSSWithMoreQueues(t *testing.T) {
	ep, err := dmaring.New(dmaring.Config{Queues: 2, RingLog: 4, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	d, err := New(Config{Region: ep.Region(), RSS: mustRSS(t, RSSConfig{Queues: 4})})
	if err == nil {
		d.Close()
		t.Fatal("New accepted an RSS over 4 queues for a 2-queue region")
	}
	if !errors.Is(err, ErrRSSConfig) {
		t.Errorf("error %v does not wrap ErrRSSConfig", err)
	}
}
