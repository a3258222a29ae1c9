package hwoffload_test

import (
	"context"
	"testing"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/hwoffload"
)

// BenchmarkRingRead measures the host's cost per record: Ring.Read (CONS
// stored per record) and Slot.Trade. The ring is refilled, untimed,
// whenever it runs empty. go run ./bench -only hwoffload_ring_read measures
// it on a twin's records against a Go channel.
func BenchmarkRingRead(b *testing.B) {
	const log2 = 16
	r := hwoffload.FakeRegion(log2)
	defer r.Close()
	m, _ := r.Map()
	d, err := hwoffload.OpenRegion(context.Background(), m)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ring := d.Ring(hwoffload.RingTrades)
	var tr sse.Trade
	seq := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		s, _, ok := ring.Read()
		if !ok {
			b.StopTimer()
			produce(r, hwoffload.RingTrades, 1<<log2, seq)
			seq += 1 << log2
			b.StartTimer()
			s, _, _ = ring.Read()
		}
		if !s.Trade(&tr) {
			b.Fatal("no trade")
		}
	}
}
