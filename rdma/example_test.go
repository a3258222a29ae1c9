package rdma_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
	"github.com/tickwire/tickwire/rdma"
)

// Two stacks joined by link/pipe: the left one WRITEs into a region of the
// right one, then READs it back.
func Example() {
	a, b := pipe.New(pipe.Options{})
	left, _ := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	right, _ := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
	defer left.Close()
	defer right.Close()
	ld, _ := rdma.Open(left)
	rd, _ := rdma.Open(right)
	defer ld.Close()
	defer rd.Close()

	// The right side: a region the peer may write and read, and a QP.
	region, _ := rd.RegisterMR(make([]byte, 64), rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	rcq, _ := rdma.NewCQ(16)
	rq, _ := rd.CreateQP(rdma.QPConfig{SendCQ: rcq, RecvCQ: rcq})

	// The left side: a buffer and a QP.
	buf, _ := ld.RegisterMR([]byte("hello, rdma"), rdma.AccessLocalWrite)
	lcq, _ := rdma.NewCQ(16)
	lq, _ := ld.CreateQP(rdma.QPConfig{SendCQ: lcq, RecvCQ: lcq})

	// What the two ends exchange (see Exchange), then connect.
	_ = lq.Connect(rdma.QPAttrs{PeerAddr: netip.MustParseAddr("10.0.0.2"), PeerQPN: rq.QPN(), RecvPSN: 100, SendPSN: 500})
	_ = rq.Connect(rdma.QPAttrs{PeerAddr: netip.MustParseAddr("10.0.0.1"), PeerQPN: lq.QPN(), RecvPSN: 500, SendPSN: 100})

	_ = lq.PostSend(&rdma.SendWR{ID: 1, Op: rdma.OpWrite, Local: buf, Length: 11,
		RemoteAddr: region.Addr() + 8, RKey: region.RKey()})
	var cs [1]rdma.Completion
	_, _ = lcq.Wait(context.Background(), cs[:])
	fmt.Println(cs[0].Op, cs[0].Status, cs[0].Bytes)
	fmt.Printf("%q\n", region.Bytes()[8:19])

	copy(buf.Bytes(), "...........")
	_ = lq.PostSend(&rdma.SendWR{ID: 2, Op: rdma.OpRead, Local: buf, Length: 5,
		RemoteAddr: region.Addr() + 8, RKey: region.RKey()})
	_, _ = lcq.Wait(context.Background(), cs[:])
	fmt.Println(cs[0].Op, cs[0].Status, string(buf.Bytes()))
	// Output:
	// WRITE success 11
	// "hello, rdma"
	// READ success hello......
}
