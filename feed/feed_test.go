package feed_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/shareddata"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/mirror"
)

// flowLog is what a recorder saw of one flow direction.
type flowLog struct {
	trades    []capgen.Trade
	orders    []capgen.Order
	tcpGaps   []capgen.Range
	seqGaps   []capgen.SequenceGap
	delivered uint64 // bytes passed to Data
	started   int
	ended     int
}

// recorder is a feed.StreamHandler that logs everything per flow and
// checks the order of the calls and the records' capture times.
type recorder struct {
	t     *testing.T
	flows map[string]*flowLog
	now   int64 // capture time of the frame being handled
	open  map[mirror.FlowKey]bool
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, flows: map[string]*flowLog{}, open: map[mirror.FlowKey]bool{}}
}

func (r *recorder) flow(k mirror.FlowKey) *flowLog {
	if !r.open[k] {
		r.t.Errorf("%v: a call outside FlowStart..FlowEnd", k)
	}
	l := r.flows[k.String()]
	if l == nil {
		l = &flowLog{}
		r.flows[k.String()] = l
	}
	return l
}

func (r *recorder) checkMeta(m feed.Meta) {
	if r.now != 0 && m.Time != r.now {
		r.t.Errorf("%v: record at capture time %d, want %d, that of the frame that completed it", m.Flow, m.Time, r.now)
	}
}

func (r *recorder) FlowStart(k mirror.FlowKey, ts int64) {
	if r.open[k] {
		r.t.Errorf("%v: FlowStart twice", k)
	}
	r.open[k] = true
	r.flow(k).started++
}

func (r *recorder) Trade(t *sse.Trade, m feed.Meta) {
	r.checkMeta(m)
	l := r.flow(m.Flow)
	l.trades = append(l.trades, capgen.TradeOf(t))
}

func (r *recorder) Order(o *sse.Order, m feed.Meta) {
	r.checkMeta(m)
	l := r.flow(m.Flow)
	l.orders = append(l.orders, capgen.OrderOf(o))
}

func (r *recorder) TCPGap(k mirror.FlowKey, offset, length uint64, ts int64) {
	l := r.flow(k)
	l.tcpGaps = append(l.tcpGaps, capgen.Range{Offset: offset, Length: length})
}

func (r *recorder) SequenceGap(category uint32, expected, got uint64, m feed.Meta) {
	r.checkMeta(m)
	l := r.flow(m.Flow)
	l.seqGaps = append(l.seqGaps, capgen.SequenceGap{Category: category, Expected: expected, Got: got})
}

func (r *recorder) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	r.flow(k).ended++
	delete(r.open, k)
}

func (r *recorder) Data(k mirror.FlowKey, offset uint64, data []byte, ts int64) {
	r.flow(k).delivered += uint64(len(data))
}

// checkTruth checks what rec saw against the generator's truth: per flow,
// every recoverable trade and order in order, the lost ranges as TCP gaps,
// delivered bytes + TCP gap bytes = the stream (up to its last delivered
// byte), the sequence gaps the lost messages make; and the totals in st.
func checkTruth(t *testing.T, f *capgen.Feed, rec *recorder, st feed.Stats) {
	t.Helper()
	var trades, orders, seqGaps, gapBytes uint64
	for fi := range f.Flows {
		fl := &f.Flows[fi]
		var want flowLog
		for i := range f.Records {
			r := &f.Records[i]
			if r.Flow != fi || !f.Recoverable(r) {
				continue
			}
			if r.Trade != nil {
				want.trades = append(want.trades, *r.Trade)
			} else {
				want.orders = append(want.orders, *r.Order)
			}
		}
		want.tcpGaps = fl.Gaps()
		want.seqGaps = f.SequenceGaps(fi)
		got := rec.flows[fl.Key()]
		if got == nil {
			t.Fatalf("flow %s: no call", fl.Key())
		}
		if !reflect.DeepEqual(got.trades, want.trades) {
			t.Errorf("flow %s: %d trades, want %d", fl.Key(), len(got.trades), len(want.trades))
		}
		if !reflect.DeepEqual(got.orders, want.orders) {
			t.Errorf("flow %s: %d orders, want %d", fl.Key(), len(got.orders), len(want.orders))
		}
		if len(got.tcpGaps)+len(want.tcpGaps) > 0 && !reflect.DeepEqual(got.tcpGaps, want.tcpGaps) {
			t.Errorf("flow %s: TCP gaps %v, want %v", fl.Key(), got.tcpGaps, want.tcpGaps)
		}
		if !reflect.DeepEqual(got.seqGaps, want.seqGaps) {
			t.Errorf("flow %s: sequence gaps %v, want %v", fl.Key(), got.seqGaps, want.seqGaps)
		}
		var gb, tail uint64
		for _, g := range got.tcpGaps {
			gb += g.Length
		}
		if n := len(fl.Lost); n > 0 && fl.Lost[n-1].Offset+fl.Lost[n-1].Length == fl.StreamBytes {
			tail = fl.Lost[n-1].Length
		}
		if got.delivered+gb+tail != fl.StreamBytes {
			t.Errorf("flow %s: %d bytes delivered + %d in TCP gaps + %d lost at the end, want the %d of the stream",
				fl.Key(), got.delivered, gb, tail, fl.StreamBytes)
		}
		if got.started != 1 || got.ended != 1 {
			t.Errorf("flow %s: %d starts, %d ends; want 1 each", fl.Key(), got.started, got.ended)
		}
		trades += uint64(len(want.trades))
		orders += uint64(len(want.orders))
		seqGaps += uint64(len(want.seqGaps))
		gapBytes += gb
	}
	if st.Trades != trades || st.Orders != orders || st.SequenceGaps != seqGaps || st.Mirror.GapBytes != gapBytes {
		t.Errorf("stats: %d trades, %d orders, %d sequence gaps, %d TCP gap bytes; want %d, %d, %d, %d",
			st.Trades, st.Orders, st.SequenceGaps, st.Mirror.GapBytes, trades, orders, seqGaps, gapBytes)
	}
	if st.DecodeErrors != 0 {
		t.Errorf("stats: %d decode errors, want 0", st.DecodeErrors)
	}
	if len(rec.open) != 0 {
		t.Errorf("%d flows still open after Close", len(rec.open))
	}
}

var impaired = capgen.Impairments{Loss: 0.03, Reorder: 0.05, Dup: 0.03, Overlap: 0.03}

// TestMatchesTruth feeds generated captures frame by frame: every
// recoverable record comes out in order, stamped with the capture time of
// the frame that completed it, and the TCP and sequence gaps are where the
// generator made them.
func TestMatchesTruth(t *testing.T) {
	for _, opt := range []capgen.Options{
		{Messages: 600, Seed: 1, Flows: 2},
		{Messages: 1500, Seed: 12, Flows: 3, Impair: impaired},
		{Messages: 800, Seed: 5, Flows: 1, VLAN: 7, WrapISN: true, Impair: capgen.Impairments{Loss: 0.05, Reorder: 0.1}},
	} {
		t.Run(fmt.Sprintf("seed%d", opt.Seed), func(t *testing.T) {
			f, err := capgen.Generate(opt)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(t)
			d, err := feed.New(feed.Config{History: true}, rec)
			if err != nil {
				t.Fatal(err)
			}
			for _, fr := range f.Frames {
				rec.now = fr.Time
				if err := d.HandleFrame(frame.LinkTypeEthernet, fr.Data, fr.Time); err != nil {
					t.Fatal(err)
				}
			}
			rec.now = 0
			d.Close()
			st := d.Stats()
			checkTruth(t, f, rec, st)
			if opt.Impair.Loss > 0 && (st.Mirror.Gaps == 0 || st.SequenceGaps == 0) {
				t.Errorf("the seed lost nothing (%d TCP gaps, %d sequence gaps): pick another", st.Mirror.Gaps, st.SequenceGaps)
			}
			if st.Mirror.Frames != uint64(len(f.Frames)) {
				t.Errorf("stats: %d frames, want %d", st.Mirror.Frames, len(f.Frames))
			}
		})
	}
}

// TestRun reads a frame.Source to its end, as from a capture file.
func TestRun(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 1000, Seed: 12, Flows: 2, Impair: impaired})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	d, err := feed.New(feed.Config{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background(), f.Source()); err != nil {
		t.Fatal(err)
	}
	d.Close()
	checkTruth(t, f, rec, d.Stats())
	var bytes uint64
	for _, fr := range f.Frames {
		bytes += uint64(len(fr.Data))
	}
	if st := d.Stats(); st.FrameBytes != bytes {
		t.Errorf("stats: %d frame bytes, want %d", st.FrameBytes, bytes)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx, f.Source()); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a done context: %v, want context.Canceled", err)
	}
}

// timeoutSource returns one read timeout, then its frames.
type timeoutSource struct {
	frame.Source
	timedOut bool
}

type timeoutError struct{}

func (timeoutError) Error() string { return "read timeout" }
func (timeoutError) Timeout() bool { return true }

func (s *timeoutSource) ReadFrames(frames []frame.Frame) (int, error) {
	if !s.timedOut {
		s.timedOut = true
		return 0, timeoutError{}
	}
	return s.Source.ReadFrames(frames)
}

// A read timeout does not end Run; another error does, as it is.
func TestRunErrors(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var trades, orders int
	d, err := feed.New(feed.Config{}, feed.HandlerFuncs{
		OnTrade: func(*sse.Trade, feed.Meta) { trades++ },
		OnOrder: func(*sse.Order, feed.Meta) { orders++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background(), &timeoutSource{Source: f.Source()}); err != nil {
		t.Fatalf("Run after a timeout: %v", err)
	}
	if trades+orders != len(f.Records) {
		t.Errorf("%d records, want %d", trades+orders, len(f.Records))
	}
	broken := errors.New("broken")
	if err := d.Run(context.Background(), errSource{broken}); err != broken {
		t.Errorf("Run: %v, want %v", err, broken)
	}
}

type errSource struct{ err error }

func (s errSource) ReadFrames([]frame.Frame) (int, error) { return 0, s.err }
func (s errSource) Close() error                          { return nil }

func TestConfigBounds(t *testing.T) {
	nop := feed.HandlerFuncs{}
	for _, c := range []struct {
		cfg  feed.Config
		want error
	}{
		{feed.Config{BufferTotal: 200000}, feed.ErrConfig},                          // STEP share under 64 KiB
		{feed.Config{BufferPerFlow: 1 << 20, BufferTotal: 1 << 20}, feed.ErrConfig}, // reassembly share under BufferPerFlow
		{feed.Config{BufferTotal: -1}, feed.ErrConfig},
		{feed.Config{MaxFlows: mirror.MaxMaxFlows + 1}, mirror.ErrConfig},
		{feed.Config{BufferPerFlow: mirror.MaxBufferPerFlow + 1}, mirror.ErrConfig},
	} {
		if _, err := feed.New(c.cfg, nop); !errors.Is(err, c.want) {
			t.Errorf("New(%+v): %v, want %v", c.cfg, err, c.want)
		}
	}
	if _, err := feed.New(feed.Config{}, nil); !errors.Is(err, feed.ErrConfig) {
		t.Errorf("New with a nil Handler: %v, want ErrConfig", err)
	}
	// The smallest valid total, and the default raised for a large buffer.
	for _, cfg := range []feed.Config{{BufferTotal: 256 << 10}, {BufferPerFlow: 1 << 30}} {
		if _, err := feed.New(cfg, nop); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}

// TestBudgetDropsUnfinishedMessages: many directions each hold an
// unfinished STEP message, far more than the STEP share of BufferTotal has
// room for. The oldest are dropped and counted; their messages show up as
// sequence gaps; the records of the other messages all come out.
func TestBudgetDropsUnfinishedMessages(t *testing.T) {
	fe := sse.NewFeedEncoder()
	tr := sse.Trade{TradeIndex: 1, TradeChannel: 1, SecurityID: sse.SecurityID("600000"), TradeTime: 9300000,
		TradePrice: 10000, TradeQty: 100000, TradeMoney: 1000000}
	var stream []byte
	for range 3 {
		var err error
		if stream, err = fe.AppendTrades(stream, []sse.Trade{tr, tr, tr}); err != nil {
			t.Fatal(err)
		}
	}
	msg := len(stream) / 3
	cut := msg + msg/2 // inside the second message
	const n = 4000
	var trades int
	d, err := feed.New(feed.Config{BufferTotal: 256 << 10, MaxFlows: 2 * n}, feed.HandlerFuncs{
		OnTrade: func(*sse.Trade, feed.Meta) { trades++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	server := capgen.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Port: 9000}
	client := capgen.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, Port: 40000}
	var buf []byte
	ts := capgen.DefaultStart.UnixNano()
	for part, b := range [][]byte{stream[:cut], stream[cut:]} {
		for i := range n {
			server.Addr = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
			client.Addr = netip.AddrFrom4([4]byte{10, 2, 0, 1})
			buf = capgen.AppendDataFrame(buf[:0], server, client, uint32(1000+part*cut), b)
			if err := d.HandleFrame(frame.LinkTypeEthernet, buf, ts); err != nil {
				t.Fatal(err)
			}
			ts += 100
		}
	}
	d.Close()
	st := d.Stats()
	// Every direction's first message comes out; the second does for the
	// directions whose unfinished message was kept.
	kept := int(st.Mirror.Flows) - int(st.UnfinishedDropped)
	if st.UnfinishedDropped == 0 || kept <= 0 {
		t.Fatalf("%d unfinished messages dropped of %d directions: want the bound reached", st.UnfinishedDropped, st.Mirror.Flows)
	}
	if want := n*3*2 + 3*kept; trades != want || int(st.Trades) != want {
		t.Errorf("%d trades (stats %d), want %d", trades, st.Trades, want)
	}
	// A dropped message is noticed when the next one of its category
	// arrives: the third, in every direction that lost the second.
	if st.SequenceGaps != st.UnfinishedDropped {
		t.Errorf("%d sequence gaps, want one per dropped message (%d)", st.SequenceGaps, st.UnfinishedDropped)
	}
	if st.UnfinishedDroppedBytes != st.UnfinishedDropped*uint64(msg-msg/2) && st.UnfinishedDroppedBytes == 0 {
		t.Errorf("%d bytes dropped", st.UnfinishedDroppedBytes)
	}
}

// The shared captures (generic TCP, not SSE) give the same TCP gaps and
// reassembly counters through feed as through a bare mirror.Assembler, and
// decoding what is not a feed counts decode errors and breaks nothing.
func TestSharedCaptures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(shareddata.Path(t, "captures"), "*.pcap"))
	if len(files) == 0 {
		t.Fatal("no capture in ../shared/captures")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var viaFeed, viaMirror []string
			d, err := feed.New(feed.Config{}, feed.HandlerFuncs{
				OnTCPGap: func(k mirror.FlowKey, off, n uint64, _ int64) {
					viaFeed = append(viaFeed, fmt.Sprint(k, off, n))
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			a, err := mirror.New(mirror.Config{}, gapLogger{&viaMirror})
			if err != nil {
				t.Fatal(err)
			}
			r, err := pcap.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			batch := frame.NewBatch(16, pcap.MaxRecordLen)
			for {
				n, err := r.ReadFrames(batch)
				for _, f := range batch[:n] {
					d.HandleFrame(f.LinkType, f.Data(), f.Time)
					a.HandleLinkFrame(f.LinkType, f.Data(), f.Time)
				}
				if err != nil {
					break
				}
			}
			d.Close()
			a.Close()
			if !reflect.DeepEqual(viaFeed, viaMirror) {
				t.Errorf("TCP gaps %v, want mirror's %v", viaFeed, viaMirror)
			}
			if st := d.Stats(); st.Mirror != a.Stats() {
				t.Errorf("stats %+v, want mirror's %+v", st.Mirror, a.Stats())
			}
		})
	}
}

type gapLogger struct{ gaps *[]string }

func (gapLogger) FlowStart(mirror.FlowKey, int64)                 {}
func (gapLogger) Data(mirror.FlowKey, uint64, []byte, int64)      {}
func (gapLogger) FlowEnd(mirror.FlowKey, mirror.EndReason, int64) {}
func (g gapLogger) Gap(k mirror.FlowKey, off, n uint64, _ int64) {
	*g.gaps = append(*g.gaps, fmt.Sprint(k, off, n))
}
