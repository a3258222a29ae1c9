package rdma

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// hookPair is newPair with AES-256-GCM on both queue pairs, keys ka and kb.
func hookPair(t testing.TB, mtu int, f faults, ka, kb byte) *pair {
	t.Helper()
	p := newPair(t, mtu, f)
	ga, _ := NewAESGCM(bytes.Repeat([]byte{ka}, 32))
	gb, _ := NewAESGCM(bytes.Repeat([]byte{kb}, 32))
	qa, err := p.da.CreateQP(QPConfig{SendCQ: p.cqa, RecvCQ: p.cqa, Hook: ga})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := p.db.CreateQP(QPConfig{SendCQ: p.cqb, RecvCQ: p.cqb, Hook: gb})
	if err != nil {
		t.Fatal(err)
	}
	p.qa.Destroy()
	p.qb.Destroy()
	p.qa, p.qb = qa, qb
	if err := qa.Connect(QPAttrs{PeerAddr: addrB, PeerQPN: qb.QPN(), RecvPSN: 0xfffff8, SendPSN: 0xfffffe, PathMTU: mtu, Timeout: testTimeout}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(QPAttrs{PeerAddr: addrA, PeerQPN: qa.QPN(), RecvPSN: 0xfffffe, SendPSN: 0xfffff8, PathMTU: mtu, Timeout: testTimeout}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAESGCMHook moves WRITEs and SENDs through AES-256-GCM over a lossy
// link: the peer's memory gets the plaintext, exactly, and nothing else;
// the PSNs wrap around 2^24 on the way (the nonce's epoch).
func TestAESGCMHook(t *testing.T) {
	for _, mtu := range []int{256, 4096} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			p := hookPair(t, mtu, faults{drop: 0.02, dup: 0.02, reorder: 0.02}, 7, 7)
			rng := rand.New(rand.NewSource(int64(mtu)))
			src := make([]byte, 1<<16)
			rng.Read(src)
			smr, _ := p.da.RegisterMR(src, 0)
			region := make([]byte, 1<<16)
			rmr, _ := p.db.RegisterMR(region, AccessRemoteWrite|AccessLocalWrite)
			recv := make([]byte, 1<<16)
			vmr, _ := p.db.RegisterMR(recv, AccessLocalWrite)
			for i, n := range []int{0, 1, 17, 4096, 4097, 40000, 1 << 16} {
				if err := p.qb.PostRecv(RecvWR{ID: uint64(i), Local: vmr, Length: len(recv)}); err != nil {
					t.Fatal(err)
				}
				for _, op := range []WROp{OpWrite, OpSendImm} {
					wr := SendWR{ID: uint64(i), Op: op, Local: smr, Length: n, RemoteAddr: rmr.Addr(), RKey: rmr.RKey(), Imm: 5}
					if err := p.qa.PostSend(&wr); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range wait(t, p.cqa, 2) {
					if c.Status != StatusSuccess || c.Bytes != n {
						t.Fatalf("size %d: %+v", n, c)
					}
				}
				if c := wait(t, p.cqb, 1)[0]; c.Status != StatusSuccess || c.Bytes != n || !c.HasImm || c.Imm != 5 {
					t.Fatalf("size %d: receive %+v", n, c)
				}
				if !bytes.Equal(region[:n], src[:n]) || !bytes.Equal(recv[:n], src[:n]) {
					t.Fatalf("size %d: plaintext did not land", n)
				}
			}
			if err := p.qa.PostSend(&SendWR{Op: OpRead, Local: vmr, Length: 1, RKey: rmr.RKey()}); err != ErrHookMessage {
				t.Errorf("READ with a hook: %v", err)
			}
			if err := p.qa.PostSend(&SendWR{Op: OpWrite, Local: smr, Length: DefaultHookMessage + 1}); err != ErrBadWorkRequest && err != ErrHookMessage {
				t.Errorf("too long a message: %v", err)
			}
			if st := p.db.Stats(); st.HookRejected != 0 {
				t.Errorf("%d messages rejected", st.HookRejected)
			}
		})
	}
}

// TestAESGCMWrongKey: a message sealed with another key is refused, NAKed
// and counted; not a byte of it reaches memory.
func TestAESGCMWrongKey(t *testing.T) {
	p := hookPair(t, 1024, faults{}, 1, 2)
	src, _ := p.da.RegisterMR(bytes.Repeat([]byte{0xee}, 3000), 0)
	region := make([]byte, 4096)
	rmr, _ := p.db.RegisterMR(region, AccessRemoteWrite)
	if err := p.qa.PostSend(&SendWR{ID: 1, Op: OpWrite, Local: src, Length: 3000, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, p.cqa, 1)[0]; c.Status != StatusRemoteOp {
		t.Fatalf("completion %+v, want remote operational error", c)
	}
	if !bytes.Equal(region, make([]byte, 4096)) {
		t.Fatal("a message that failed its tag reached memory")
	}
	if st := p.db.Stats(); st.HookRejected != 1 {
		t.Errorf("HookRejected %d", st.HookRejected)
	}
}

// TestHookAllocs: a sealed WRITE allocates nothing in steady state.
func TestHookAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	p := hookPair(t, 1024, faults{}, 3, 3)
	src, _ := p.da.RegisterMR(make([]byte, 4096), 0)
	rmr, _ := p.db.RegisterMR(make([]byte, 4096), AccessRemoteWrite)
	wr := SendWR{Op: OpWrite, Local: src, Length: 3000, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}
	var cs [1]Completion
	allocs := testing.AllocsPerRun(200, func() {
		if err := p.qa.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		for p.cqa.Poll(cs[:]) == 0 {
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per sealed WRITE, want 0", allocs)
	}
}
