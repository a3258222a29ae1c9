package mirror_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// fuzzMaxFlows is the Config.MaxFlows of the targets that feed a few frames:
// New makes the flow table whole, and the default 1024 directions cost
// about 1 MB and a millisecond per Assembler, more than the frames. Their
// inputs have at most 2 directions.
const fuzzMaxFlows = 4

// FuzzHandleFrame feeds arbitrary bytes as one Ethernet frame, after a SYN
// for the direction most seeds use, and checks that parsing never panics and
// that the package's invariants hold.
func FuzzHandleFrame(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzHandleFrame.
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, mode := range []mirror.ChecksumMode{mirror.ChecksumAuto, mirror.ChecksumIgnore} {
			rec := newRecorder(t)
			rec.quiet = true
			a, err := mirror.New(mirror.Config{Checksum: mode, BufferPerFlow: 64, MaxFlows: fuzzMaxFlows, History: true}, rec)
			if err != nil {
				t.Fatal(err)
			}
			_ = a.HandleIPv4(appendIPv4(nil, ab(1000, fSYN, "")), 0)
			_ = a.HandleFrame(frame, 1)
			_ = a.HandleFrame(frame, 2) // again: a duplicate
			a.Close()
			st := a.Stats()
			if st.Frames != 3 || st.ActiveFlows != 0 {
				t.Fatalf("stats %+v", st)
			}
			var delivered uint64
			for _, s := range rec.streams {
				delivered += uint64(len(s.data))
			}
			if delivered != st.DeliveredBytes {
				t.Fatalf("handler saw %d bytes, stats say %d", delivered, st.DeliveredBytes)
			}
		}
	})
}

// FuzzAssembler decodes the input as a sequence of segments of one flow
// direction and its reverse (good, corrupt or offload-like checksums, any
// flags, sequence jumps, time steps) and checks that the Assembler never
// panics, that every direction's Data and Gap calls tile its stream from
// offset 0 (the recorder checks contiguity), that no direction ends on a gap
// and that the handler and the counters agree. The first-copy rule is
// checked against an oracle by the property tests.
//
// Each segment is 8 bytes of header followed by its payload:
// flags (bit 7: reverse direction, low bits TCP flags), a 16-bit sequence
// delta, a payload length byte, a 16-bit time step in microseconds, a byte
// selecting the checksum treatment, a payload byte pattern.
func FuzzAssembler(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzAssembler.
	f.Fuzz(func(t *testing.T, isn uint32, prog []byte) {
		rec := newRecorder(t)
		// One buffer for the two directions: they take it from each other.
		cfg := mirror.Config{BufferPerFlow: 256, MaxBufferTotal: 256, MaxFlows: 2, HoleTimeout: 1000_000, History: len(prog)%2 == 0}
		a, err := mirror.New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		// The same packets as Ethernet frames, through HandleFrame's
		// straight path where they take it, must give the same results.
		recFrame := newRecorder(t)
		fa, err := mirror.New(cfg, recFrame)
		if err != nil {
			t.Fatal(err)
		}
		var seqs [2]uint32
		seqs[0], seqs[1] = isn, isn^0x5a5a5a5a
		ts := int64(0)
		for len(prog) >= 8 {
			h := prog[:8]
			prog = prog[8:]
			dir := int(h[0] >> 7)
			flags := h[0] & 0x3f
			delta := int16(binary.BigEndian.Uint16(h[1:]))
			n := int(h[3])
			ts += int64(binary.BigEndian.Uint16(h[4:])) * 1000
			cs := int(h[6] % 3)
			seq := seqs[dir] + uint32(int32(delta))
			seqs[dir] = seq
			data := make([]byte, n)
			for i := range data {
				data[i] = h[7] + byte(i)
			}
			s := ab(seq, flags&^fACK, string(data))
			if dir == 1 {
				s = ba(seq, flags&^fACK, string(data))
			}
			s.flags = flags
			s.cs = cs
			ip := appendIPv4(nil, s)
			err := a.HandleIPv4(ip, ts)
			if errFrame := fa.HandleFrame(ethernet(ip), ts); errFrame != err {
				t.Fatalf("HandleIPv4 %v, HandleFrame %v", err, errFrame)
			}
		}
		a.Close()
		fa.Close()
		if st, stFrame := a.Stats(), fa.Stats(); st != stFrame {
			t.Fatalf("Stats\nHandleIPv4  %+v\nHandleFrame %+v", st, stFrame)
		}
		if len(rec.streams) != len(recFrame.streams) {
			t.Fatalf("HandleIPv4 saw %d directions, HandleFrame %d", len(rec.streams), len(recFrame.streams))
		}
		for k, s := range rec.streams {
			if !slices.Equal(s.events, recFrame.get(k).events) {
				t.Fatalf("%v: HandleIPv4 and HandleFrame made different Handler calls", k)
			}
		}
		st := a.Stats()
		if st.ActiveFlows != 0 {
			t.Fatalf("ActiveFlows %d after Close", st.ActiveFlows)
		}
		var delivered, gaps uint64
		for _, s := range rec.streams {
			delivered += uint64(len(s.data))
			for _, g := range s.gaps {
				gaps += g.Len
			}
			if len(s.delivered) > 0 && !s.delivered[len(s.delivered)-1] {
				t.Fatal("a flow ended on a gap")
			}
			if s.starts != len(s.ends) {
				t.Fatalf("%d starts, %d ends", s.starts, len(s.ends))
			}
		}
		if delivered != st.DeliveredBytes || gaps != st.GapBytes {
			t.Fatalf("handler saw %d bytes and %d gap bytes, stats %+v", delivered, gaps, st)
		}
	})
}

// FuzzLinkTypes feeds arbitrary bytes as one Ethernet frame (after a SYN
// for the direction most seeds use), and the same frame converted to every
// other link type that can carry it (Linux cooked SLL and SLL2, raw IP,
// raw IPv4): each must give the same Handler calls and counters as the
// Ethernet original.
func FuzzLinkTypes(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzLinkTypes.
	syn := linkFrame{link: frame.LinkTypeEthernet, data: ethernet(appendIPv4(nil, ab(1000, fSYN, ""))), ts: 0}
	f.Fuzz(func(t *testing.T, eth []byte) {
		frames := []linkFrame{syn, {link: frame.LinkTypeEthernet, data: eth, ts: 1}, {link: frame.LinkTypeEthernet, data: eth, ts: 2}}
		checkSameAsEthernet(t, "input", mirror.Config{BufferPerFlow: 64, MaxFlows: fuzzMaxFlows, History: true}, frames)
		checkSameAsEthernet(t, "input", mirror.Config{Checksum: mirror.ChecksumIgnore, MaxFlows: fuzzMaxFlows}, frames)
	})
}
