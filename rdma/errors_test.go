package rdma

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestRemoteAccessViolations: a WRITE or READ outside a region, with a
// wrong rkey or without the access is NAKed, counted, completes with
// StatusRemoteAccess, and writes nothing.
func TestRemoteAccessViolations(t *testing.T) {
	for _, c := range []struct {
		name   string
		op     WROp
		access Access
		off    int64 // from the region's address
		n      int
		badKey bool
	}{
		{"write bad rkey", OpWrite, AccessRemoteWrite, 0, 8, true},
		{"write past the end", OpWrite, AccessRemoteWrite, 4096 - 4, 8, false},
		{"write before the start", OpWrite, AccessRemoteWrite, -8, 8, false},
		{"write read-only", OpWrite, AccessRemoteRead, 0, 8, false},
		{"write with imm read-only", OpWriteImm, AccessRemoteRead, 0, 8, false},
		{"multi-packet write past the end", OpWrite, AccessRemoteWrite, 0, 4097, false},
		{"read write-only", OpRead, AccessRemoteWrite, 0, 8, false},
		{"read past the end", OpRead, AccessRemoteRead, 4000, 200, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, 1024, faults{})
			region := make([]byte, 4096)
			rmr, _ := p.db.RegisterMR(region, c.access|AccessLocalWrite)
			if err := p.qb.PostRecv(RecvWR{ID: 9, Local: rmr, Length: 16}); err != nil {
				t.Fatal(err)
			}
			src := bytes.Repeat([]byte{0xaa}, 8192)
			lmr, _ := p.da.RegisterMR(src, AccessLocalWrite)
			key := rmr.RKey()
			if c.badKey {
				key += 100
			}
			wr := SendWR{ID: 1, Op: c.op, Local: lmr, Length: c.n, RemoteAddr: uint64(int64(rmr.Addr()) + c.off), RKey: key}
			if err := p.qa.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			got := wait(t, p.cqa, 1)
			if got[0].Status != StatusRemoteAccess || got[0].ID != 1 {
				t.Fatalf("completion %+v, want remote access error", got[0])
			}
			if !bytes.Equal(region, make([]byte, 4096)) {
				t.Fatal("the violating request wrote into the region")
			}
			if st := p.db.Stats(); st.AccessNAKsSent != 1 {
				t.Errorf("responder counted %d access NAKs", st.AccessNAKsSent)
			}
			if st := p.da.Stats(); st.ErrorNAKsReceived != 1 {
				t.Errorf("requester counted %d error NAKs", st.ErrorNAKsReceived)
			}
			if p.qa.State() != StateError || p.qb.State() != StateError {
				t.Errorf("states %v %v, want both ERROR", p.qa.State(), p.qb.State())
			}
			// The responder's receive was flushed.
			if rc := wait(t, p.cqb, 1); rc[0].ID != 9 || rc[0].Status != StatusFlushed {
				t.Errorf("receive completion %+v", rc[0])
			}
		})
	}
}

// TestRNR: a SEND that finds no receive buffer draws RNR NAKs until one is
// posted, then lands.
func TestRNR(t *testing.T) {
	p := newPair(t, 256, faults{})
	src := []byte("a message that waits for a buffer to be posted")
	lmr, _ := p.da.RegisterMR(src, 0)
	if err := p.qa.PostSend(&SendWR{ID: 7, Op: OpSend, Local: lmr, Length: len(src)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.db.Stats().RNRNAKsSent < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no RNR NAKs")
		}
		time.Sleep(time.Millisecond)
	}
	if p.cqa.Len() != 0 {
		t.Fatal("the SEND completed without a receive buffer")
	}
	buf := make([]byte, 256)
	rmr, _ := p.db.RegisterMR(buf, AccessLocalWrite)
	if err := p.qb.PostRecv(RecvWR{ID: 8, Local: rmr, Length: len(buf)}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, p.cqa, 1)[0]; c.Status != StatusSuccess || c.ID != 7 {
		t.Fatalf("send completion %+v", c)
	}
	if c := wait(t, p.cqb, 1)[0]; c.Status != StatusSuccess || c.ID != 8 || c.Bytes != len(src) || !bytes.Equal(buf[:c.Bytes], src) {
		t.Fatalf("receive completion %+v, %q", c, buf)
	}
	if st := p.da.Stats(); st.RNRNAKsReceived < 3 {
		t.Errorf("requester counted %d RNR NAKs", st.RNRNAKsReceived)
	}
}

// TestRetryExceeded: a requester whose peer is gone resends RetryCount
// times, then completes with StatusRetryExceeded and flushes the rest.
func TestRetryExceeded(t *testing.T) {
	p := newPair(t, 1024, faults{})
	p.qb.Destroy()
	src := make([]byte, 64)
	lmr, _ := p.da.RegisterMR(src, 0)
	for i := uint64(1); i <= 2; i++ {
		if err := p.qa.PostSend(&SendWR{ID: i, Op: OpWrite, Local: lmr, Length: 64, RKey: 1}); err != nil {
			t.Fatal(err)
		}
	}
	got := wait(t, p.cqa, 2)
	if got[0].Status != StatusRetryExceeded || got[1].Status != StatusFlushed {
		t.Fatalf("completions %+v", got)
	}
	if st := p.da.Stats(); st.Timeouts != 7 || st.RetryExceeded != 1 {
		t.Errorf("timeouts %d, retry exceeded %d; want 7, 1", st.Timeouts, st.RetryExceeded)
	}
	if st := p.db.Stats(); st.UnknownQP != 16 {
		t.Errorf("peer counted %d packets for an unknown QP, want 16 (2 packets, sent 8 times)", st.UnknownQP)
	}
	if err := p.qa.PostSend(&SendWR{ID: 3, Op: OpWrite, Local: lmr, Length: 1}); err != ErrQPState {
		t.Errorf("PostSend in ERROR: %v", err)
	}
}

// TestDataPathAllocs: a WRITE, its ACK and its completion allocate nothing
// in steady state.
func TestDataPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	p := newPair(t, 1024, faults{})
	src := make([]byte, 4096)
	lmr, _ := p.da.RegisterMR(src, AccessLocalWrite)
	rmr, _ := p.db.RegisterMR(make([]byte, 4096), AccessRemoteWrite|AccessRemoteRead)
	var cs [4]Completion
	ctx := context.Background()
	for _, op := range []WROp{OpWrite, OpRead} {
		wr := SendWR{Op: op, Local: lmr, Length: 3000, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}
		allocs := testing.AllocsPerRun(200, func() {
			if err := p.qa.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			if n, err := p.cqa.Wait(ctx, cs[:]); n != 1 || err != nil || cs[0].Status != StatusSuccess {
				t.Fatalf("%d %v %+v", n, err, cs[0])
			}
		})
		if allocs != 0 {
			t.Errorf("%v of 3 packets and its completion: %.1f allocations, want 0", op, allocs)
		}
	}
}
