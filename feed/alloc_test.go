package feed_test

import (
	"testing"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/frame"
)

// counter is a Handler that counts records, allocation-free.
type counter struct {
	feed.HandlerFuncs
	records uint64
}

func (c *counter) Trade(*sse.Trade, feed.Meta) { c.records++ }
func (c *counter) Order(*sse.Order, feed.Meta) { c.records++ }

// Frames to records in steady state allocate nothing: the flow state and
// decoder are made once per flow direction, the reassembly buffers once.
func TestDoesNotAllocate(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 3000, Seed: 16, Flows: 2,
		Impair: capgen.Impairments{Reorder: 0.05, Dup: 0.05, Overlap: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	d, err := feed.New(feed.Config{History: true}, c)
	if err != nil {
		t.Fatal(err)
	}
	warm := len(f.Frames) / 4
	for _, fr := range f.Frames[:warm] {
		d.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time)
	}
	next := warm
	before := c.records
	allocs := testing.AllocsPerRun(400, func() {
		fr := f.Frames[next]
		d.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time)
		next++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per frame, want 0", allocs)
	}
	if c.records == before {
		t.Fatal("no record decoded while measuring")
	}
	if next >= len(f.Frames)-10 {
		t.Fatal("ran out of frames: generate a longer feed")
	}
}

// BenchmarkDecoder measures frames in memory to typed records: reassembly,
// STEP framing and FAST decoding, a Handler that counts.
func BenchmarkDecoder(b *testing.B) {
	f, err := capgen.Generate(capgen.Options{Messages: 5000, Seed: 17, Flows: 4,
		Impair: capgen.Impairments{Reorder: 0.01, Dup: 0.01, Overlap: 0.01}})
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for _, fr := range f.Frames {
		bytes += int64(len(fr.Data))
	}
	b.ReportAllocs()
	b.SetBytes(bytes)
	var records uint64
	start := time.Now()
	for b.Loop() {
		c := &counter{}
		d, err := feed.New(feed.Config{History: true}, c)
		if err != nil {
			b.Fatal(err)
		}
		for _, fr := range f.Frames {
			d.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time)
		}
		d.Close()
		records += c.records
	}
	b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
}
