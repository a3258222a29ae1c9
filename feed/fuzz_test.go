package feed_test

import (
	"net/netip"
	"testing"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// fuzzLog is a StreamHandler that checks the calls' order and tiling for
// one flow direction, and replays what it was given into a reference
// sse.FeedDecoder: the records feed reports must be the reference's.
type fuzzLog struct {
	t        *testing.T
	next     uint64 // stream offset the next Data or TCPGap must start at
	ref      *sse.FeedDecoder
	records  uint64
	seqGaps  uint64
	gapBytes uint64
}

func (l *fuzzLog) FlowStart(mirror.FlowKey, int64)                 {}
func (l *fuzzLog) FlowEnd(mirror.FlowKey, mirror.EndReason, int64) {}
func (l *fuzzLog) Trade(*sse.Trade, feed.Meta)                     { l.records++ }
func (l *fuzzLog) Order(*sse.Order, feed.Meta)                     { l.records++ }
func (l *fuzzLog) SequenceGap(uint32, uint64, uint64, feed.Meta)   { l.seqGaps++ }

func (l *fuzzLog) Data(k mirror.FlowKey, offset uint64, data []byte, ts int64) {
	if offset != l.next {
		l.t.Fatalf("data at %d, want %d", offset, l.next)
	}
	l.next += uint64(len(data))
	_ = l.ref.Feed(data)
}

func (l *fuzzLog) TCPGap(k mirror.FlowKey, offset, length uint64, ts int64) {
	if offset != l.next || length == 0 {
		l.t.Fatalf("gap of %d at %d, want one at %d", length, offset, l.next)
	}
	l.next += length
	l.gapBytes += length
	l.ref.Discontinuity(int64(length))
}

type nopRecords struct{}

func (nopRecords) OnTrade(*sse.Trade)           {}
func (nopRecords) OnOrder(*sse.Order)           {}
func (nopRecords) OnGap(uint32, uint64, uint64) {}

// FuzzFeed sends stream as one TCP flow direction cut into segments by
// plan: each plan byte is a segment length (1 to 128), with its top bit set
// the segment is lost, and its second bit swaps it with the next. Whatever
// the bytes, feed reports contiguous data and gaps, and the records, the
// sequence gaps and the counters agree with a bare sse.FeedDecoder given
// the same bytes and gaps.
func FuzzFeed(f *testing.F) {
	capture, err := capgen.Generate(capgen.Options{Messages: 6, Seed: 4})
	if err != nil {
		f.Fatal(err)
	}
	stream := capture.Flows[0].Stream
	f.Add(stream, []byte{127, 127, 127, 127})
	f.Add(stream, []byte{100, 0x80 | 90, 60, 0x40 | 127, 127, 30})
	f.Add([]byte("8=STEP.1.0.0\x019=5\x01garbage"), []byte{3, 0x80 | 5, 10})
	f.Fuzz(func(t *testing.T, stream, plan []byte) { runOne(t, stream, plan) })
}

func runOne(t *testing.T, stream, plan []byte) {
	{
		if len(plan) == 0 {
			plan = []byte{127}
		}
		type seg struct {
			off, n int
			lost   bool
		}
		var segs []seg
		for i, off := 0, 0; off < len(stream); i++ {
			p := plan[i%len(plan)]
			n := min(int(p&0x7f)+1, len(stream)-off)
			segs = append(segs, seg{off, n, p&0x80 != 0})
			if p&0x40 != 0 && len(segs) > 1 {
				segs[len(segs)-1], segs[len(segs)-2] = segs[len(segs)-2], segs[len(segs)-1]
			}
			off += n
		}
		log := &fuzzLog{t: t, ref: sse.NewFeedDecoder(sse.FeedConfig{}, nopRecords{})}
		d, err := feed.New(feed.Config{}, log)
		if err != nil {
			t.Fatal(err)
		}
		server := capgen.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, 0, 1}), Port: 9129}
		client := capgen.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, 0, 2}), Port: 50000}
		var buf []byte
		ts := int64(1)
		for _, s := range segs {
			if s.lost {
				continue
			}
			buf = capgen.AppendDataFrame(buf[:0], server, client, 1000+uint32(s.off), stream[s.off:s.off+s.n])
			d.HandleFrame(frame.LinkTypeEthernet, buf, ts)
			ts++
		}
		d.Close()
		st := d.Stats()
		ref := log.ref.Stats()
		if log.records != ref.Trades+ref.Orders || st.Trades+st.Orders != log.records {
			t.Errorf("%d records (stats %d), want the reference decoder's %d", log.records, st.Trades+st.Orders, ref.Trades+ref.Orders)
		}
		if log.seqGaps != ref.STEP.Gaps || st.SequenceGaps != log.seqGaps {
			t.Errorf("%d sequence gaps (stats %d), want the reference decoder's %d", log.seqGaps, st.SequenceGaps, ref.STEP.Gaps)
		}
		if st.Mirror.DeliveredBytes+st.Mirror.GapBytes != log.next || st.Mirror.GapBytes != log.gapBytes || log.next > uint64(len(stream)) {
			t.Errorf("%d bytes delivered + %d in gaps, want the %d reported (stream %d)",
				st.Mirror.DeliveredBytes, st.Mirror.GapBytes, log.next, len(stream))
		}
	}
}
