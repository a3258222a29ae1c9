package mirror_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tickwire/tickwire/mirror"
)

// TestFastPathMatchesGeneral: HandleFrame takes a straight-line path of its
// own for the common segment (untagged, in order, good checksums), while
// HandleIPv4 always takes the general path. The same packets through both,
// two interleaved directions with random impairments, pure ACKs, bad and
// offload-like checksums, RSTs, VLAN tags, fragments and timeouts, must give
// the same errors, Handler calls, Stats and offloaded flows.
func TestFastPathMatchesGeneral(t *testing.T) {
	iterations := 300
	if testing.Short() || raceEnabled {
		iterations = 50
	}
	for it := 0; it < iterations; it++ {
		rng := rand.New(rand.NewPCG(uint64(it), 4))
		imp := impairment{
			loss:    []float64{0, 0, 0.05}[rng.IntN(3)],
			dup:     []float64{0, 0.1}[rng.IntN(2)],
			reorder: []float64{0, 0, 0.1, 0.3}[rng.IntN(4)],
			overlap: []float64{0, 0.1}[rng.IntN(2)],
			corrupt: rng.IntN(3) == 0,
		}
		cfg := mirror.Config{
			BufferPerFlow: []int{0, 1500, 4096}[rng.IntN(3)],
			HoleTimeout:   []time.Duration{-1, 0, time.Millisecond}[rng.IntN(3)],
			History:       rng.IntN(4) == 0,
			Checksum:      []mirror.ChecksumMode{mirror.ChecksumAuto, mirror.ChecksumVerify, mirror.ChecksumIgnore}[rng.IntN(3)],
			MaxFlows:      []int{0, 1}[rng.IntN(2)],
		}
		// Checksum trouble: none, a few bad segments, or offload-like
		// checksums from some point of each direction on (from the start:
		// an offloading sender; later: a direction known good, whose
		// offload-like segments are dropped).
		badRate := []float64{0, 0, 0.05}[rng.IntN(3)]
		offloadFrom := []int{0, 10, 1 << 30, 1 << 30}[rng.IntN(4)]
		var pkts []vlanSeg
		for dir := 0; dir < 2; dir++ {
			stream := make([]byte, 1+rng.IntN(30000))
			for i := range stream {
				stream[i] = byte(rng.Uint32())
			}
			isn := rng.Uint32()
			for n, g := range genStream(rng, stream, imp, rng.IntN(2) == 0, rng.IntN(2) == 0) {
				mk, seq := ab, isn+1+uint32(g.off)
				if dir == 1 {
					mk = ba
				}
				var s seg
				if g.flags&fSYN != 0 {
					s = mk(isn, fSYN, "")
				} else {
					s = mk(seq, g.flags|fPSH, string(g.data))
				}
				switch r := rng.Float64(); {
				case n >= offloadFrom:
					s.cs = csOffload
				case r < badRate:
					s.cs = csBad
				case r < 0.01:
					s.flags |= fRST
				case r < 0.02:
					s.fragMF = true
				}
				var vlans []uint16
				if rng.IntN(20) == 0 {
					vlans = []uint16{uint16(rng.IntN(4096))}
				}
				pkts = append(pkts, vlanSeg{s, vlans})
				if rng.IntN(10) == 0 {
					// A pure ACK, as a direction sends while the other
					// streams.
					pkts = append(pkts, vlanSeg{s: mk(seq, 0, "")})
				}
			}
		}
		rng.Shuffle(len(pkts), func(i, j int) {
			// Keep each direction's own order mostly: swap only neighbours.
			if j == i+1 || i == j+1 {
				pkts[i], pkts[j] = pkts[j], pkts[i]
			}
		})

		name := fmt.Sprintf("it%d %+v %+v bad=%v offloadFrom=%v", it, imp, cfg, badRate, offloadFrom)
		compareFrameAndIPv4(t, name, cfg, pkts, rng)
	}
}

// vlanSeg is a segment and the VLAN tags of its frame.
type vlanSeg struct {
	s     seg
	vlans []uint16
}

// compareFrameAndIPv4 hands pkts to one Assembler with HandleFrame and to
// another with HandleIPv4, with random capture time steps and Flush calls
// from rng, and fails unless both give the same errors, Handler calls,
// Stats and offloaded flows.
func compareFrameAndIPv4(t *testing.T, name string, cfg mirror.Config, pkts []vlanSeg, rng *rand.Rand) {
	t.Helper()
	viaFrame, viaIPv4 := newRecorder(t), newRecorder(t)
	fa, err := mirror.New(cfg, viaFrame)
	if err != nil {
		t.Fatal(err)
	}
	ia, err := mirror.New(cfg, viaIPv4)
	if err != nil {
		t.Fatal(err)
	}
	ts := int64(0)
	for i, p := range pkts {
		ts += int64(rng.IntN(400_000))
		ip := appendIPv4(nil, p.s)
		errF := fa.HandleFrame(ethernet(ip, p.vlans...), ts)
		errI := ia.HandleIPv4(ip, ts)
		if errF != errI {
			t.Fatalf("%s: packet %d: HandleFrame %v, HandleIPv4 %v", name, i, errF, errI)
		}
		if rng.IntN(40) == 0 {
			fa.Flush(ts)
			ia.Flush(ts)
		}
	}
	fa.Close()
	ia.Close()
	if sf, si := fa.Stats(), ia.Stats(); sf != si {
		t.Fatalf("%s: Stats\nHandleFrame %+v\nHandleIPv4  %+v", name, sf, si)
	}
	if of, oi := fa.OffloadedFlows(), ia.OffloadedFlows(); !slices.Equal(of, oi) {
		t.Fatalf("%s: OffloadedFlows %v and %v", name, of, oi)
	}
	if !slices.Equal(viaFrame.order, viaIPv4.order) {
		t.Fatalf("%s: directions seen %v and %v", name, viaFrame.order, viaIPv4.order)
	}
	for _, k := range viaFrame.order {
		ef, ei := viaFrame.get(k).events, viaIPv4.get(k).events
		if !slices.Equal(ef, ei) {
			t.Fatalf("%s: %v: Handler calls differ\nHandleFrame %d: %.300q\nHandleIPv4  %d: %.300q", name, k, len(ef), ef, len(ei), ei)
		}
	}
}

// TestFastPathHoleFilling: a segment that ends where the bytes held begin
// takes HandleFrame's straight path and drains them; one that ends a byte
// later, or a byte earlier, does not or drains nothing.
func TestFastPathHoleFilling(t *testing.T) {
	const isn = 1000
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(i * 7)
	}
	at := func(lo, hi int) vlanSeg { return vlanSeg{s: ab(isn+1+uint32(lo), fPSH, string(data[lo:hi]))} }
	syn := vlanSeg{s: ab(isn, fSYN, "")}
	for _, cfg := range []mirror.Config{{}, {History: true}, {Checksum: mirror.ChecksumIgnore}, {BufferPerFlow: 256}, {BufferPerFlow: 256, History: true}} {
		for name, pkts := range map[string][]vlanSeg{
			"fills":        {syn, at(0, 50), at(100, 200), at(50, 100), at(200, 300)},
			"one past":     {syn, at(0, 50), at(100, 200), at(50, 101), at(200, 300)},
			"one short":    {syn, at(0, 50), at(100, 200), at(50, 99), at(99, 100), at(200, 300)},
			"two runs":     {syn, at(0, 50), at(100, 150), at(200, 250), at(50, 100), at(150, 200), at(250, 300)},
			"ring wraps":   {syn, at(0, 250), at(280, 300), at(250, 280)},
			"inside a run": {syn, at(0, 50), at(60, 200), at(50, 60), at(55, 58)},
		} {
			compareFrameAndIPv4(t, fmt.Sprintf("%s %+v", name, cfg), cfg, pkts, rand.New(rand.NewPCG(1, 2)))
		}
	}
	// The oracle for the first case: the whole stream, in order, no gap.
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{BufferPerFlow: 256}, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []vlanSeg{syn, at(0, 50), at(100, 200), at(50, 100), at(200, 300)} {
		if err := a.HandleFrame(ethernet(appendIPv4(nil, p.s)), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := rec.get(keyAB); string(st.data) != string(data) || len(st.gaps) != 0 {
		t.Fatalf("delivered %d bytes with gaps %v, want the %d bytes of the stream", len(st.data), st.gaps, len(data))
	}
}

// TestReuseAfterClose: Close empties the table, caches of recent flows
// included: the same directions afterwards start new flows, through
// HandleFrame and HandleIPv4 alike.
func TestReuseAfterClose(t *testing.T) {
	for _, cfg := range []mirror.Config{{}, {Checksum: mirror.ChecksumIgnore}, {MaxFlows: 2}} {
		rec := newRecorder(t)
		a, err := mirror.New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			for i, s := range []seg{ab(100, fSYN, ""), ba(500, fSYN, ""), ab(101, fPSH, "hello"), ba(501, fPSH, "world"), ab(106, fPSH, "again")} {
				ip := appendIPv4(nil, s)
				if i%2 == 0 {
					err = a.HandleFrame(ethernet(ip), int64(i))
				} else {
					err = a.HandleIPv4(ip, int64(i))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
		}
		keyBA := mirror.FlowKey{SrcIP: ipB, DstIP: ipA, SrcPort: 9000, DstPort: 40000}
		for k, want := range map[mirror.FlowKey]string{keyAB: "helloagainhelloagain", keyBA: "worldworld"} {
			if st := rec.get(k); st.starts != 2 || len(st.ends) != 2 || string(st.data) != want {
				t.Errorf("%+v %v: %d starts, %d ends, data %q; want 2, 2, %q", cfg, k, st.starts, len(st.ends), st.data, want)
			}
		}
	}
}
