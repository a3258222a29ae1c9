package rdma

import (
	"runtime"
	"testing"
)

// BenchmarkWrite64 times a 64-byte WRITE from PostSend to its completion
// between two stacks over link/pipe.
func BenchmarkWrite64(b *testing.B) {
	p := newPair(b, 4096, faults{})
	src, _ := p.da.RegisterMR(make([]byte, 64), 0)
	rmr, _ := p.db.RegisterMR(make([]byte, 64), AccessRemoteWrite)
	wr := SendWR{Op: OpWrite, Local: src, Length: 64, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}
	var cs [1]Completion
	b.ReportAllocs()
	for b.Loop() {
		if err := p.qa.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		for p.cqa.Poll(cs[:]) == 0 {
			runtime.Gosched()
		}
	}
}
