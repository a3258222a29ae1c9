package main

import (
	"bufio"
	"io"
	"testing"
	"time"

	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/frame"
)

// newTestPipeline wires a pipeline writing to io.Discard to a feed
// decoder, as run does.
func newTestPipeline(tb testing.TB, format string, quiet bool) (*pipeline, *feed.Decoder) {
	tb.Helper()
	o := options{format: format, decode: "sse", quiet: quiet, history: true}
	p := newPipeline(o, bufio.NewWriterSize(io.Discard, 64<<10))
	d, err := feed.New(o.feedConfig(), p.handler())
	if err != nil {
		tb.Fatal(err)
	}
	return p, d
}

// records is the number of records d has decoded.
func records(d *feed.Decoder) uint64 {
	st := d.Stats()
	return st.Trades + st.Orders
}

// Frames to records in steady state allocate nothing, whatever the output
// format: flow state and decoder buffers are made once per flow direction.
func TestPipelineDoesNotAllocate(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 3000, Seed: 16, Flows: 2,
		Impair: capgen.Impairments{Reorder: 0.05, Dup: 0.05, Overlap: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "json", "csv"} {
		_, a := newTestPipeline(t, format, false)
		warm := len(f.Frames) / 4
		for _, fr := range f.Frames[:warm] {
			a.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time)
		}
		next := warm
		before := records(a)
		allocs := testing.AllocsPerRun(400, func() {
			fr := f.Frames[next]
			a.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time)
			next++
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per frame, want 0", format, allocs)
		}
		if records(a) == before {
			t.Fatalf("%s: no record decoded while measuring", format)
		}
		if next >= len(f.Frames)-10 {
			t.Fatal("ran out of frames: generate a longer feed")
		}
	}
}

// BenchmarkPipeline measures the demo's path without the file reader: frames
// in memory through the reassembler, the SSE decoder and the formatter.
func BenchmarkPipeline(b *testing.B) {
	f, err := capgen.Generate(capgen.Options{Messages: 5000, Seed: 17, Flows: 4,
		Impair: capgen.Impairments{Reorder: 0.01, Dup: 0.01, Overlap: 0.01}})
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for _, fr := range f.Frames {
		bytes += int64(len(fr.Data))
	}
	for _, bc := range []struct {
		name, format string
		quiet        bool
	}{{"quiet", "text", true}, {"text", "text", false}, {"json", "json", false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(bytes)
			var n uint64
			start := time.Now()
			for b.Loop() {
				_, a := newTestPipeline(b, bc.format, bc.quiet)
				for _, fr := range f.Frames {
					a.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time)
				}
				a.Close()
				n += records(a)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		})
	}
}
