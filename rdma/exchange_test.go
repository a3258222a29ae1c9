package rdma

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestExchangeOverTCP connects two queue pairs with what Exchange carries
// over a tickwire TCP connection, then WRITEs into the advertised region.
func TestExchangeOverTCP(t *testing.T) {
	p := newPair(t, 1024, faults{})
	// Fresh queue pairs, in RESET, to connect from what is exchanged.
	qa, _ := p.da.CreateQP(QPConfig{SendCQ: p.cqa, RecvCQ: p.cqa})
	qb, _ := p.db.CreateQP(QPConfig{SendCQ: p.cqb, RecvCQ: p.cqb})
	region := make([]byte, 4096)
	rmr, _ := p.db.RegisterMR(region, AccessRemoteWrite)
	ln, err := p.sb.ListenTCP(18515) // perftest's port
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		info ConnInfo
		err  error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		info, err := Exchange(c, ConnInfo{QPN: qb.QPN(), PSN: 0x123, RKey: rmr.RKey(), Addr: rmr.Addr(), Len: uint64(rmr.Len()), MTU: 1024})
		got <- result{info, err}
	}()
	c, err := p.sa.DialTCP(ctx, netip.AddrPortFrom(addrB, 18515))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fromB, err := Exchange(c, ConnInfo{QPN: qa.QPN(), PSN: 0xabcdef, MTU: 1024})
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	fromA := r.info
	if fromA.QPN != qa.QPN() || fromA.PSN != 0xabcdef || fromB.RKey != rmr.RKey() || fromB.Addr != rmr.Addr() || fromB.Len != 4096 {
		t.Fatalf("exchanged %+v and %+v", fromA, fromB)
	}
	if err := qa.Connect(QPAttrs{PeerAddr: addrB, PeerQPN: fromB.QPN, RecvPSN: fromB.PSN, SendPSN: 0xabcdef, PathMTU: fromB.MTU}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(QPAttrs{PeerAddr: addrA, PeerQPN: fromA.QPN, RecvPSN: fromA.PSN, SendPSN: 0x123, PathMTU: fromA.MTU}); err != nil {
		t.Fatal(err)
	}
	src, _ := p.da.RegisterMR([]byte("over the exchanged connection"), 0)
	if err := qa.PostSend(&SendWR{ID: 1, Op: OpWrite, Local: src, Length: src.Len(), RemoteAddr: fromB.Addr + 100, RKey: fromB.RKey}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, p.cqa, 1)[0]; c.Status != StatusSuccess {
		t.Fatalf("%+v", c)
	}
	if !bytes.Equal(region[100:100+src.Len()], src.Bytes()) {
		t.Fatalf("region %q", region[100:140])
	}
}

func TestConnInfoErrors(t *testing.T) {
	good := ConnInfo{QPN: 1, PSN: 2, RKey: 3, Addr: 4, Len: 5, MTU: 256}
	b, err := good.MarshalBinary()
	if err != nil || len(b) != ConnInfoSize {
		t.Fatal(err, len(b))
	}
	var c ConnInfo
	if err := c.UnmarshalBinary(b); err != nil || c != good {
		t.Fatalf("%v %+v", err, c)
	}
	for _, bad := range [][]byte{nil, b[:35], append(bytes.Clone(b), 0), append([]byte("RCv1"), b[4:]...),
		append(append(bytes.Clone(b[:4]), 1, 0, 0, 0), b[8:]...), append(bytes.Clone(b[:32]), 0, 0, 3, 0)} {
		if err := c.UnmarshalBinary(bad); !errors.Is(err, ErrConnInfo) {
			t.Errorf("% x: %v", bad, err)
		}
	}
	if _, err := (ConnInfo{MTU: 100}).MarshalBinary(); !errors.Is(err, ErrConnInfo) {
		t.Errorf("MTU 100: %v", err)
	}
}

// FuzzConnInfo: whatever is accepted round-trips exactly.
func FuzzConnInfo(f *testing.F) {
	b, _ := ConnInfo{QPN: 0x11, PSN: 0xabcdef, RKey: 0x1000, Addr: 0x10000000, Len: 1 << 20, MTU: 1024}.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var c ConnInfo
		if c.UnmarshalBinary(b) != nil {
			return
		}
		out, err := c.MarshalBinary()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("round trip: %v % x != % x", err, out, b)
		}
	})
}
