package rdma

import (
	"bytes"
	"testing"
)

// TestStateMachine: transitions out of order fail with ErrQPState; posting
// needs RTS (or SQD) for sends and INIT or later for receives.
func TestStateMachine(t *testing.T) {
	p := newPair(t, 1024, faults{})
	q, _ := p.da.CreateQP(QPConfig{SendCQ: p.cqa, RecvCQ: p.cqa})
	mr, _ := p.da.RegisterMR(make([]byte, 64), AccessLocalWrite)
	a := QPAttrs{PeerAddr: addrB, PeerQPN: 1}
	if q.State() != StateReset || q.ReadyToReceive(&a) != ErrQPState || q.ReadyToSend(&a) != ErrQPState || q.Drain() != ErrQPState {
		t.Fatal("RESET accepted a transition other than INIT")
	}
	if err := q.PostRecv(RecvWR{Local: mr, Length: 8}); err != ErrQPState {
		t.Fatalf("PostRecv in RESET: %v", err)
	}
	if err := q.Init(); err != nil || q.Init() != ErrQPState {
		t.Fatal(err)
	}
	if err := q.PostRecv(RecvWR{Local: mr, Length: 8}); err != nil {
		t.Fatalf("PostRecv in INIT: %v", err)
	}
	if err := q.PostSend(&SendWR{Op: OpSend, Local: mr, Length: 1}); err != ErrQPState {
		t.Fatalf("PostSend in INIT: %v", err)
	}
	for _, bad := range []QPAttrs{{PeerQPN: 1}, {PeerAddr: addrB, PathMTU: 300}, {PeerAddr: addrB, PathMTU: 8192}, {PeerAddr: addrB, PeerQPN: 1 << 24}} {
		if err := q.ReadyToReceive(&bad); err != ErrAttrs {
			t.Errorf("ReadyToReceive(%+v) = %v", bad, err)
		}
	}
	if err := q.ReadyToReceive(&a); err != nil || q.State() != StateRTR {
		t.Fatal(err, q.State())
	}
	if err := q.ReadyToSend(&QPAttrs{RetryCount: 8}); err != ErrAttrs {
		t.Errorf("retry count 8: %v", err)
	}
	if err := q.ReadyToSend(&a); err != nil || q.State() != StateRTS {
		t.Fatal(err, q.State())
	}
	if err := q.Resume(); err != ErrQPState {
		t.Errorf("Resume in RTS: %v", err)
	}
	q.SetError()
	if q.State() != StateError {
		t.Fatal(q.State())
	}
	if c := wait(t, p.cqa, 1)[0]; c.Status != StatusFlushed || c.Op != OpRecv {
		t.Errorf("the receive was not flushed: %+v", c)
	}
}

// TestDrain: in SQD a request already started finishes and a new one waits
// for Resume.
func TestDrain(t *testing.T) {
	p := newPair(t, 1024, faults{})
	src, _ := p.da.RegisterMR(bytes.Repeat([]byte{1}, 64), 0)
	region := make([]byte, 64)
	rmr, _ := p.db.RegisterMR(region, AccessRemoteWrite)
	if err := p.qa.Drain(); err != nil {
		t.Fatal(err)
	}
	if err := p.qa.PostSend(&SendWR{ID: 1, Op: OpWrite, Local: src, Length: 64, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}); err != nil {
		t.Fatal(err)
	}
	// Over link/pipe a request goes out, and is answered, inside PostSend.
	if p.cqa.Len() != 0 || p.db.Stats().RxPackets != 0 {
		t.Fatal("a request started in SQD")
	}
	if !p.qa.Drained() {
		t.Error("not drained with nothing started")
	}
	if err := p.qa.Resume(); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, p.cqa, 1)[0]; c.ID != 1 || c.Status != StatusSuccess || !bytes.Equal(region, src.Bytes()) {
		t.Fatalf("%+v", c)
	}
}
