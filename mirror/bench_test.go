package mirror_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"

	"github.com/tickwire/tickwire/mirror"
)

// The benchmarks feed both reassemblers the same in-memory Ethernet frames,
// 2 KiB apart in one buffer like a receive ring: one or 16 flow directions
// of 1408-byte segments (the seed's MSS), in order or with about 10% of the
// segments swapped with the next one of their flow. The ring holds 256
// frames (512 KiB, cache-resident, as frames handled as they arrive are);
// the Cold variants use 4096 frames (8 MiB), so every payload byte the
// checksum reads comes from L3 or memory. From the second pass over the ring
// on, each frame's sequence number moves one pass forward just before the
// frame is handed in again (an incremental checksum update, a few ns,
// measured for both reassemblers alike), so the streams keep advancing.
// segments/s and MB/s count payload segments and bytes per second of
// measured time.

const (
	benchMSS        = 1408
	benchFrames     = 256
	benchFramesCold = 4096
	benchISN        = 0xfff00000 // the stream wraps around 2^32 early on
)

type benchFeed struct {
	syns    [][]byte // one per flow
	frames  [][]byte
	order   []int    // frame index for each position in a pass
	sched   [][]byte // the frames in the order of a pass
	pos     int      // next position in sched
	wrapped bool     // a whole pass was handed in: frames now advance
	step    uint32   // sequence space a flow covers in one pass
	stepSum uint32   // step modulo 0xffff
	flows   int
	n       int // frames in the ring
}

// Offsets in the benchmark frames (Ethernet, 20-byte IPv4 and TCP headers).
const (
	benchSeqOff = 14 + 20 + 4
	benchCkOff  = 14 + 20 + 16
)

// newBenchFeed builds a ring of n frames of the given number of flows,
// interleaved round-robin, with a fraction reorder of the frames swapped
// with the next frame of their flow.
func newBenchFeed(reorder float64, flows, n int) *benchFeed {
	f := &benchFeed{flows: flows, n: n}
	payload := make([]byte, benchMSS)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	for j := 0; j < flows; j++ {
		s := ab(benchISN, fSYN, "")
		s.flags, s.sport = fSYN, uint16(40000+j)
		f.syns = append(f.syns, ethernet(appendIPv4(nil, s)))
	}
	// Frames sit in one buffer, 2 KiB apart, as a capture ring or a
	// link/frame batch holds them.
	const stride = 2048
	mem := make([]byte, n*stride)
	for i := 0; i < n; i++ {
		s := ab(benchISN+1+uint32(i/flows*benchMSS), fPSH, string(payload))
		s.sport = uint16(40000 + i%flows)
		fr := ethernet(appendIPv4(nil, s))
		slot := mem[i*stride : i*stride+len(fr) : (i+1)*stride]
		copy(slot, fr)
		f.frames = append(f.frames, slot)
		f.order = append(f.order, i)
	}
	for i := 0; i+flows < n; i++ {
		// Swap a frame with the next one of its flow.
		if rng.Float64() < reorder && f.order[i] == i && f.order[i+flows] == i+flows {
			f.order[i], f.order[i+flows] = f.order[i+flows], f.order[i]
		}
	}
	for _, i := range f.order {
		f.sched = append(f.sched, f.frames[i])
	}
	f.step = uint32(n / flows * benchMSS)
	f.stepSum = f.step % 0xffff
	return f
}

// advance moves frame fr's sequence number one pass forward, updating the
// TCP checksum incrementally. As 2^16 is 1 modulo 0xffff, a sequence number
// adds itself modulo 0xffff to the ones' complement sum: moving it by step
// adds step modulo 0xffff, less 1 when it wraps around 2^32. Both
// reassemblers pay for this alike; BenchmarkHarnessOnly measures it.
func (f *benchFeed) advance(fr []byte) {
	old := binary.BigEndian.Uint32(fr[benchSeqOff:])
	nw := old + f.step
	binary.BigEndian.PutUint32(fr[benchSeqOff:], nw)
	sum := uint32(^binary.BigEndian.Uint16(fr[benchCkOff:])) + f.stepSum
	if nw < old {
		sum += 0xfffe // minus 1
	}
	sum = sum>>16 + sum&0xffff
	sum = sum>>16 + sum&0xffff
	binary.BigEndian.PutUint16(fr[benchCkOff:], ^uint16(sum))
}

// next returns the next frame to hand in. A cursor, not an index modulo
// the ring size, keeps the harness's own cost (paid by both reassemblers
// alike) small next to what it measures.
func (f *benchFeed) next() []byte {
	if f.pos == len(f.sched) {
		f.pos, f.wrapped = 0, true
	}
	fr := f.sched[f.pos]
	f.pos++
	if f.wrapped {
		f.advance(fr)
	}
	return fr
}

func reportRates(b *testing.B, segments int) {
	elapsed := b.Elapsed()
	if elapsed <= 0 {
		return
	}
	b.ReportMetric(float64(segments)/elapsed.Seconds(), "segments/s")
	b.ReportMetric(float64(segments)*benchMSS/elapsed.Seconds()/1e6, "MB/s")
}

func benchMirror(b *testing.B, reorder float64, flows, frames int, cfg mirror.Config) {
	feed := newBenchFeed(reorder, flows, frames)
	h := &nopHandler{}
	a, err := mirror.New(cfg, h)
	if err != nil {
		b.Fatal(err)
	}
	for _, syn := range feed.syns {
		if err := a.HandleFrame(syn, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	ts := int64(2)
	for i := 0; i < b.N; i++ {
		if err := a.HandleFrame(feed.next(), ts); err != nil {
			b.Fatal(err)
		}
		ts += 1000
	}
	b.StopTimer()
	st := a.Stats()
	if st.Gaps != 0 || st.Duplicates != 0 || st.ChecksumBad != 0 {
		b.Fatalf("unexpected stats %+v", st)
	}
	reportRates(b, b.N)
}

// Default configuration: TCP checksums verified (ChecksumAuto).
func BenchmarkMirrorInOrder(b *testing.B) { benchMirror(b, 0, 1, benchFrames, mirror.Config{}) }
func BenchmarkMirrorReorder10(b *testing.B) {
	benchMirror(b, 0.10, 1, benchFrames, mirror.Config{})
}
func BenchmarkMirrorInOrderHistory(b *testing.B) {
	benchMirror(b, 0, 1, benchFrames, mirror.Config{History: true})
}
func BenchmarkMirrorInOrder16Flows(b *testing.B) {
	benchMirror(b, 0, 16, benchFrames, mirror.Config{})
}
func BenchmarkMirrorInOrderCold(b *testing.B) {
	benchMirror(b, 0, 1, benchFramesCold, mirror.Config{})
}
func BenchmarkMirrorReorder10Cold(b *testing.B) {
	benchMirror(b, 0.10, 1, benchFramesCold, mirror.Config{})
}

// ChecksumIgnore: the reassembly work alone, as gopacket does it (it does
// not verify checksums either).
func BenchmarkMirrorInOrderNoChecksum(b *testing.B) {
	benchMirror(b, 0, 1, benchFrames, mirror.Config{Checksum: mirror.ChecksumIgnore})
}
func BenchmarkMirrorReorder10NoChecksum(b *testing.B) {
	benchMirror(b, 0.10, 1, benchFrames, mirror.Config{Checksum: mirror.ChecksumIgnore})
}
func BenchmarkMirrorInOrder16FlowsNoChecksum(b *testing.B) {
	benchMirror(b, 0, 16, benchFrames, mirror.Config{Checksum: mirror.ChecksumIgnore})
}
func BenchmarkMirrorInOrderColdNoChecksum(b *testing.B) {
	benchMirror(b, 0, 1, benchFramesCold, mirror.Config{Checksum: mirror.ChecksumIgnore})
}
func BenchmarkMirrorReorder10ColdNoChecksum(b *testing.B) {
	benchMirror(b, 0.10, 1, benchFramesCold, mirror.Config{Checksum: mirror.ChecksumIgnore})
}

// gopacket side: the same frames through DecodingLayerParser (the
// allocation-free decoder) and reassembly.Assembler.
//
// The two comparisons, side by side:
//   - matched work, no checksums: BenchmarkMirror*NoChecksum
//     (ChecksumIgnore) against BenchmarkGopacket* (reassembly.Assembler
//     verifies no checksum);
//   - checksums verified: BenchmarkMirror* (the default mode) against
//     BenchmarkGopacketVerify*, which adds gopacket's own IPv4.VerifyChecksum
//     and TCP.VerifyChecksum for every frame before assembling it, as the
//     default mode verifies both (every frame here is valid: one that is
//     not fails the benchmark).
//
// BenchmarkHarnessOnly is the per-frame cost both sides pay for the
// harness itself.

type gpFactory struct{ bytes *int }

func (f *gpFactory) New(_, _ gopacket.Flow, _ *layers.TCP, _ reassembly.AssemblerContext) reassembly.Stream {
	return &gpStream{bytes: f.bytes}
}

type gpStream struct{ bytes *int }

func (s *gpStream) Accept(_ *layers.TCP, _ gopacket.CaptureInfo, _ reassembly.TCPFlowDirection, _ reassembly.Sequence, start *bool, _ reassembly.AssemblerContext) bool {
	*start = true
	return true
}

func (s *gpStream) ReassembledSG(sg reassembly.ScatterGather, _ reassembly.AssemblerContext) {
	n, _ := sg.Lengths()
	*s.bytes += n
}

func (s *gpStream) ReassemblyComplete(reassembly.AssemblerContext) bool { return false }

type gpContext struct{ ci gopacket.CaptureInfo }

func (c *gpContext) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

func benchGopacket(b *testing.B, reorder float64, flows, frames int, verify bool) {
	feed := newBenchFeed(reorder, flows, frames)
	var bytes int
	asm := reassembly.NewAssembler(reassembly.NewStreamPool(&gpFactory{bytes: &bytes}))
	var eth layers.Ethernet
	var ip layers.IPv4
	var tcp layers.TCP
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip, &tcp)
	parser.IgnoreUnsupported = true
	if err := tcp.SetNetworkLayerForChecksum(&ip); err != nil {
		b.Fatal(err)
	}
	decoded := make([]gopacket.LayerType, 0, 4)
	ctx := &gpContext{}
	handle := func(fr []byte, ts int64) {
		if err := parser.DecodeLayers(fr, &decoded); err != nil {
			b.Fatal(err)
		}
		if verify {
			if err, r := ip.VerifyChecksum(); err != nil || !r.Valid {
				b.Fatalf("IPv4 checksum: %v %+v", err, r)
			}
			if err, r := tcp.VerifyChecksum(); err != nil || !r.Valid {
				b.Fatalf("TCP checksum: %v %+v", err, r)
			}
		}
		ctx.ci.Timestamp = time.Unix(0, ts)
		asm.AssembleWithContext(ip.NetworkFlow(), &tcp, ctx)
	}
	for _, syn := range feed.syns {
		handle(syn, 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	ts := int64(2)
	for i := 0; i < b.N; i++ {
		handle(feed.next(), ts)
		ts += 1000
	}
	b.StopTimer()
	if want := (b.N - 2) * benchMSS; bytes < want && reorder == 0 {
		b.Fatalf("gopacket delivered %d bytes, want at least %d", bytes, want)
	}
	reportRates(b, b.N)
}

func BenchmarkGopacketInOrder(b *testing.B)        { benchGopacket(b, 0, 1, benchFrames, false) }
func BenchmarkGopacketReorder10(b *testing.B)      { benchGopacket(b, 0.10, 1, benchFrames, false) }
func BenchmarkGopacketInOrder16Flows(b *testing.B) { benchGopacket(b, 0, 16, benchFrames, false) }
func BenchmarkGopacketInOrderCold(b *testing.B)    { benchGopacket(b, 0, 1, benchFramesCold, false) }
func BenchmarkGopacketReorder10Cold(b *testing.B)  { benchGopacket(b, 0.10, 1, benchFramesCold, false) }

// Checksums verified with gopacket's own functions: the counterparts of the
// default-mode BenchmarkMirror* above.
func BenchmarkGopacketVerifyInOrder(b *testing.B) { benchGopacket(b, 0, 1, benchFrames, true) }
func BenchmarkGopacketVerifyReorder10(b *testing.B) {
	benchGopacket(b, 0.10, 1, benchFrames, true)
}
func BenchmarkGopacketVerifyInOrder16Flows(b *testing.B) {
	benchGopacket(b, 0, 16, benchFrames, true)
}
func BenchmarkGopacketVerifyInOrderCold(b *testing.B) {
	benchGopacket(b, 0, 1, benchFramesCold, true)
}
func BenchmarkGopacketVerifyReorder10Cold(b *testing.B) {
	benchGopacket(b, 0.10, 1, benchFramesCold, true)
}

// BenchmarkHarnessOnly measures the benchmarks' own per-frame cost: moving a
// frame's sequence number forward and reading its header, without a
// reassembler. Both sides above include it.
func BenchmarkHarnessOnly(b *testing.B) {
	feed := newBenchFeed(0, 1, benchFrames)
	b.ReportAllocs()
	var sum byte
	for i := 0; i < b.N; i++ {
		fr := feed.next()
		sum += fr[14+20+13]
	}
	benchSink = sum
	reportRates(b, b.N)
}

var benchSink byte
