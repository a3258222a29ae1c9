package rdma

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// TestOperations runs every operation at every path MTU, for messages of
// 1 byte to 1 MiB, over a clean link and over one that drops, duplicates
// and reorders packets: every byte lands where it should, each request
// completes once and in order, each receive once and in order.
func TestOperations(t *testing.T) {
	sizes := []int{1, 3, 255, 256, 257, 1000, 4096, 4097, 65536 + 5, 1 << 20}
	if testing.Short() || raceEnabled {
		sizes = []int{1, 257, 4097, 65536 + 5}
	}
	for _, f := range []faults{{}, {drop: 0.02, dup: 0.02, reorder: 0.02}} {
		for _, mtu := range []int{256, 512, 1024, 2048, 4096} {
			t.Run(fmt.Sprintf("mtu%d/drop%.2f", mtu, f.drop), func(t *testing.T) {
				t.Parallel()
				p := newPair(t, mtu, f)
				runOperations(t, p, sizes)
				sa, sb := p.da.Stats(), p.db.Stats()
				t.Logf("A %+v", sa)
				t.Logf("B %+v", sb)
				if f.drop > 0 && sa.Retransmits+sb.Retransmits == 0 {
					t.Errorf("no retransmissions counted over a lossy link")
				}
				// Over a clean link only a timeout resends (a delivery
				// queued behind a busy handler can outlast one), and no
				// packet is ever out of sequence without a resend.
				if f.drop == 0 && sa.Timeouts+sb.Timeouts == 0 &&
					sa.Retransmits+sb.Retransmits+sb.OutOfSequence+sa.SeqNAKsReceived+sa.StaleResponses != 0 {
					t.Errorf("resends or gaps over a clean link without a timeout")
				}
				if sb.AccessNAKsSent+sb.InvalidNAKsSent+sa.ErrorNAKsReceived+sa.BadICRC+sb.BadICRC+sa.Malformed+sb.Malformed != 0 {
					t.Errorf("errors on a good connection")
				}
			})
		}
	}
}

func runOperations(t *testing.T, p *pair, sizes []int) {
	max := sizes[len(sizes)-1]
	rng := rand.New(rand.NewSource(int64(max)))
	src := make([]byte, 5*max)
	rng.Read(src)
	remote := make([]byte, 5*max)
	rng.Read(remote[2*max : 3*max]) // what the READ reads
	want := bytes.Clone(remote)
	local, _ := p.da.RegisterMR(make([]byte, max), AccessLocalWrite) // READ lands here
	srcMR, _ := p.da.RegisterMR(src, 0)
	rmr, _ := p.db.RegisterMR(remote, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	id := uint64(0)
	for _, n := range sizes {
		// B posts three receives: WRITE with immediate, SEND, SEND with immediate.
		for k := 3; k < 6; k++ {
			if err := p.qb.PostRecv(RecvWR{ID: uint64(n)<<8 | uint64(k), Local: rmr, Offset: 0, Length: max}); err != nil {
				t.Fatal(err)
			}
		}
		wrs := []SendWR{
			{Op: OpWrite, Local: srcMR, Offset: 0, Length: n, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()},
			{Op: OpWriteImm, Local: srcMR, Offset: max, Length: n, RemoteAddr: rmr.Addr() + uint64(max), RKey: rmr.RKey(), Imm: uint32(n)},
			{Op: OpRead, Local: local, Offset: 0, Length: n, RemoteAddr: rmr.Addr() + uint64(2*max), RKey: rmr.RKey()},
			{Op: OpSend, Local: srcMR, Offset: 3 * max, Length: n},
			{Op: OpSendImm, Local: srcMR, Offset: 4 * max, Length: n, Imm: ^uint32(n)},
		}
		for i := range wrs {
			id++
			wrs[i].ID = id
			if err := p.qa.PostSend(&wrs[i]); err != nil {
				t.Fatal(err)
			}
		}
		got := wait(t, p.cqa, len(wrs))
		for i, c := range got {
			if c.ID != wrs[i].ID || c.Status != StatusSuccess || c.Op != wrs[i].Op || c.Bytes != n {
				t.Logf("A %+v", p.da.Stats())
				t.Logf("B %+v", p.db.Stats())
				t.Fatalf("size %d: completion %d = %+v, want ID %d %v success %d bytes", n, i, c, wrs[i].ID, wrs[i].Op, n)
			}
		}
		copy(want[:n], src[:n])
		copy(want[max:max+n], src[max:max+n])
		if !bytes.Equal(local.Bytes()[:n], remote[2*max:2*max+n]) {
			t.Fatalf("size %d: READ brought other bytes", n)
		}
		rc := wait(t, p.cqb, 3)
		wantRecv := []struct {
			op  WROp
			imm bool
			v   uint32
		}{{OpRecvWriteImm, true, uint32(n)}, {OpRecv, false, 0}, {OpRecv, true, ^uint32(n)}}
		for i, c := range rc {
			w := wantRecv[i]
			if c.ID != uint64(n)<<8|uint64(i+3) || c.Status != StatusSuccess || c.Op != w.op || c.Bytes != n || c.HasImm != w.imm || c.Imm != w.v {
				t.Fatalf("size %d: receive completion %d = %+v", n, i, c)
			}
		}
		// The receives all went to offset 0 of the region: the SEND with
		// immediate, last, wrote its bytes there.
		copy(want[:n], src[4*max:4*max+n])
		if !bytes.Equal(remote, want) {
			t.Fatalf("size %d: remote region differs from what was written", n)
		}
		// Nothing more completes: each request and receive exactly once.
		if k := p.cqa.Poll(make([]Completion, 1)) + p.cqb.Poll(make([]Completion, 1)); k != 0 {
			t.Fatalf("size %d: an extra completion", n)
		}
	}
}
