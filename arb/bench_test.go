package arb_test

import (
	"testing"

	"github.com/tickwire/tickwire/arb"
	"github.com/tickwire/tickwire/internal/cputime"
)

// reportCPU reports CPU nanoseconds per op beside the wall-clock figure,
// which on a shared machine includes waiting for a core.
func reportCPU(b *testing.B, start int64) {
	if start > 0 {
		b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkArbiter measures the arbiter on two lines of MoldUDP64 packets
// of one 32-byte message, each line losing 1%: ns per datagram offered.
func BenchmarkArbiter(b *testing.B) {
	lines, pkts := feed2(1<<12, 7)
	h := &nopHandler{}
	a, _ := arb.New(arb.Config{}, h)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cputime.Process())
	for i := 0; i < b.N; i++ {
		j := i % len(pkts)
		if j == 0 && i > 0 {
			a.End(int64(i))
			a.Reset()
		}
		a.Datagram(lines[j], pkts[j], int64(j))
	}
}

// BenchmarkCopyBaseline copies the same datagrams into one buffer: the
// least any consumer of the datagrams does.
func BenchmarkCopyBaseline(b *testing.B) {
	_, pkts := feed2(1<<12, 7)
	var buf [2048]byte
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cputime.Process())
	for i := 0; i < b.N; i++ {
		n += copy(buf[:], pkts[i%len(pkts)])
	}
	if n == 0 {
		b.Fatal("nothing copied")
	}
}
