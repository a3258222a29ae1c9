package main

import (
	"bufio"
	"io"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/mirror"
)

// newTestPipeline wires a pipeline writing to io.Discard to an Assembler,
// as run does.
func newTestPipeline(tb testing.TB, format string, quiet bool) (*pipeline, *mirror.Assembler) {
	tb.Helper()
	o := options{format: format, decode: "sse", quiet: quiet, stepBudget: defaultBufferTotal / 4}
	p := newPipeline(o, bufio.NewWriterSize(io.Discard, 64<<10))
	a, err := mirror.New(mirror.Config{History: true}, p)
	if err != nil {
		tb.Fatal(err)
	}
	return p, a
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
		p, a := newTestPipeline(t, format, false)
		warm := len(f.Frames) / 4
		for _, fr := range f.Frames[:warm] {
			a.HandleFrame(fr.Data, fr.Time)
		}
		next := warm
		before := p.trades + p.orders
		allocs := testing.AllocsPerRun(400, func() {
			fr := f.Frames[next]
			a.HandleFrame(fr.Data, fr.Time)
			next++
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per frame, want 0", format, allocs)
		}
		if p.trades+p.orders == before {
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
			var records uint64
			start := time.Now()
			for b.Loop() {
				p, a := newTestPipeline(b, bc.format, bc.quiet)
				for _, fr := range f.Frames {
					a.HandleFrame(fr.Data, fr.Time)
				}
				a.Close()
				records += p.trades + p.orders
			}
			b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
		})
	}
}
