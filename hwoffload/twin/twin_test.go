package twin_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// patience bounds every wait on a condition: CI is a loaded 2-core machine.
const patience = 60 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// capture generates a feed and writes it as a pcap file in t.TempDir().
func capture(t *testing.T, opt capgen.Options) (*capgen.Feed, string) {
	t.Helper()
	f, err := capgen.Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "feed.pcap")
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WritePcap(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return f, path
}

// start runs a twin on src with its region in a file, and opens it as a
// host does.
func start(t *testing.T, src frame.Source, log2 int) (*twin.Twin, *hwoffload.Device) {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		return startInMemory(t, src, log2) // no file mapping here
	}
	path := filepath.Join(t.TempDir(), "u50")
	tw, err := twin.New(twin.Config{Region: path, Input: src, RingLog2: log2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tw.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("region file left after Close: %v", err)
		}
	})
	dev, err := hwoffload.Open(ctxT(t), "twin:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return tw, dev
}

// startInMemory is start with the region in Go memory.
func startInMemory(t *testing.T, src frame.Source, log2 int) (*twin.Twin, *hwoffload.Device) {
	t.Helper()
	return startConfig(t, twin.Config{Input: src, RingLog2: log2})
}

// startConfig runs a twin of config cfg (its region in Go memory unless
// cfg.Region is set) and opens it in this process.
func startConfig(t *testing.T, cfg twin.Config) (*twin.Twin, *hwoffload.Device) {
	t.Helper()
	tw, err := twin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Close() })
	m, err := tw.Region().Map()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hwoffload.OpenRegion(ctxT(t), m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return tw, dev
}

func openPcap(t *testing.T, path string) *pcap.Reader {
	t.Helper()
	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// event is a ring 2 record, decoded.
type event struct {
	kind           uint16
	flow           uint32
	offset, length uint64
	category       uint32
	expected, got  uint64
	reason         uint8
}

// output is everything read from the rings.
type output struct {
	trades []sse.Trade
	orders []sse.Order
	events []event
	lost   [hwoffload.NumRings]uint64
	seqs   [hwoffload.NumRings][]uint64
}

// drain reads every ring until STATUS.INPUT_DONE is set and the rings are
// empty.
func drain(t *testing.T, dev *hwoffload.Device) *output {
	t.Helper()
	ctx := ctxT(t)
	var out output
	for {
		done := dev.Status()&hwoffload.StatusInputDone != 0 // before the reads: records come first
		n := 0
		for k := range hwoffload.NumRings {
			r := dev.Ring(k)
			for {
				s, lost, ok := r.Read()
				if !ok {
					break
				}
				n++
				out.lost[k] += lost
				out.seqs[k] = append(out.seqs[k], s.Seq())
				switch k {
				case hwoffload.RingTrades:
					var tr sse.Trade
					if !s.Trade(&tr) {
						t.Fatalf("ring 0 record of kind %d", s.Kind())
					}
					out.trades = append(out.trades, tr)
				case hwoffload.RingOrders:
					var o sse.Order
					if !s.Order(&o) {
						t.Fatalf("ring 1 record of kind %d", s.Kind())
					}
					out.orders = append(out.orders, o)
				case hwoffload.RingEvents:
					ev := event{kind: s.Kind(), flow: s.Flow()}
					switch ev.kind {
					case hwoffload.KindTCPGap:
						ev.offset, ev.length = s.TCPGap()
					case hwoffload.KindSeqGap:
						ev.category, ev.expected, ev.got = s.SeqGap()
					case hwoffload.KindFlowEnd:
						ev.reason = s.EndReason()
					}
					out.events = append(out.events, ev)
				default:
					t.Fatalf("record on ring %d", k)
				}
				if s.OutCycles() < s.RxCycles() {
					t.Fatalf("ring %d seq %d: out_cycles %d before rx_cycles %d", k, s.Seq(), s.OutCycles(), s.RxCycles())
				}
			}
		}
		if done && n == 0 {
			return &out
		}
		if n == 0 {
			if err := ctx.Err(); err != nil {
				t.Fatalf("draining: %v (STATUS %#x, counters %+v)", err, dev.Status(), dev.Counters())
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// want returns the truth's recoverable trades and orders in stream order.
func want(f *capgen.Feed) (trades []capgen.Trade, orders []capgen.Order) {
	for i := range f.Records {
		r := &f.Records[i]
		if !f.Recoverable(r) {
			continue
		}
		if r.Trade != nil {
			trades = append(trades, *r.Trade)
		} else {
			orders = append(orders, *r.Order)
		}
	}
	return trades, orders
}

func compare(t *testing.T, f *capgen.Feed, out *output) {
	t.Helper()
	wt, wo := want(f)
	if len(out.trades) != len(wt) || len(out.orders) != len(wo) {
		t.Fatalf("got %d trades, %d orders; truth has %d, %d recoverable", len(out.trades), len(out.orders), len(wt), len(wo))
	}
	for i := range wt {
		if got := capgen.TradeOf(&out.trades[i]); got != wt[i] {
			t.Fatalf("trade %d:\n got %+v\nwant %+v", i, got, wt[i])
		}
	}
	for i := range wo {
		if got := capgen.OrderOf(&out.orders[i]); got != wo[i] {
			t.Fatalf("order %d:\n got %+v\nwant %+v", i, got, wo[i])
		}
	}
}

func countKind(evs []event, kind uint16) int {
	n := 0
	for _, e := range evs {
		if e.kind == kind {
			n++
		}
	}
	return n
}

// TestTruth: a clean capture through the twin gives every record of the
// truth file, in order, with the counters and latency to match.
func TestTruth(t *testing.T) {
	f, path := capture(t, capgen.Options{Messages: 1500, Seed: 1})
	_, dev := start(t, openPcap(t, path), 14)
	if dev.Status()&hwoffload.StatusLinkUp == 0 {
		t.Errorf("STATUS %#x: LINK_UP clear with a pcap input", dev.Status())
	}
	time.Sleep(5 * time.Millisecond) // the twin must not consume before RUN
	if c := dev.Counters(); c.RxFrames != 0 {
		t.Fatalf("the twin took %d frames before RUN", c.RxFrames)
	}
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	out := drain(t, dev)
	compare(t, f, out)
	c := dev.Counters()
	if c.RxFrames != uint64(len(f.Frames)) || c.Trades != uint64(len(out.trades)) || c.Orders != uint64(len(out.orders)) ||
		c.MirrorGapBytes != 0 || c.DecodeErrors != 0 || c.StepSeqGaps != 0 {
		t.Errorf("counters %+v; %d frames, %d trades, %d orders", c, len(f.Frames), len(out.trades), len(out.orders))
	}
	if c.MirrorBytes < f.Flows[0].StreamBytes {
		t.Errorf("MIRROR_BYTES %d < the stream's %d", c.MirrorBytes, f.Flows[0].StreamBytes)
	}
	total := uint64(len(out.trades) + len(out.orders) + len(out.events))
	if l := dev.Latency(); l.Count != total || l.Min > l.Max || l.Sum < l.Max || l.Max == 0 {
		t.Errorf("latency %+v for %d records", l, total)
	} else {
		t.Logf("latency: %d records, min %v mean %v max %v", l.Count, hwoffload.CyclesDuration(l.Min), l.Mean(), hwoffload.CyclesDuration(l.Max))
	}
	if len(out.events) == 0 || out.events[0].kind != hwoffload.KindFlowStart {
		t.Fatalf("events %+v: want a flow start first", out.events)
	}
	if n := countKind(out.events, hwoffload.KindFlowEnd); n != countKind(out.events, hwoffload.KindFlowStart) {
		t.Errorf("%d flow ends for %d starts", n, countKind(out.events, hwoffload.KindFlowStart))
	}
	for k := range hwoffload.NumRings {
		for i, s := range out.seqs[k] {
			if s != uint64(i) {
				t.Fatalf("ring %d record %d has seq %d", k, i, s)
			}
		}
	}
	if st := dev.Status(); st&(hwoffload.StatusInputDone|hwoffload.StatusRunning|hwoffload.StatusError) != hwoffload.StatusInputDone|hwoffload.StatusRunning {
		t.Errorf("STATUS %#x, ERROR %v", st, dev.Err())
	}
	now := time.Now()
	if d := dev.Time(dev.Cycles()).Sub(now); d < -time.Second || d > time.Second {
		t.Errorf("CYCLES converts to %v from now", d)
	}
}

// TestLoss: with segments lost, every record untouched by a loss arrives,
// and a TCP gap event per lost range.
func TestLoss(t *testing.T) {
	f, path := capture(t, capgen.Options{Messages: 1500, Seed: 2, Impair: capgen.Impairments{Loss: 0.02, Reorder: 0.02, Dup: 0.01}})
	_, dev := start(t, openPcap(t, path), 14)
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	out := drain(t, dev)
	compare(t, f, out)
	gaps := 0
	for i := range f.Flows {
		gaps += len(f.Flows[i].Gaps())
	}
	if gaps == 0 {
		t.Fatal("the capture lost nothing: pick another seed")
	}
	if n := countKind(out.events, hwoffload.KindTCPGap); n != gaps {
		t.Errorf("%d TCP gap events, the truth has %d gaps", n, gaps)
	}
	// One flow: the gap and sequence gap events are the truth's, in order.
	var tcpGaps []capgen.Range
	var seqGaps []capgen.SequenceGap
	for _, e := range out.events {
		switch e.kind {
		case hwoffload.KindTCPGap:
			tcpGaps = append(tcpGaps, capgen.Range{Offset: e.offset, Length: e.length})
		case hwoffload.KindSeqGap:
			seqGaps = append(seqGaps, capgen.SequenceGap{Category: e.category, Expected: e.expected, Got: e.got})
		}
	}
	if want := f.Flows[0].Gaps(); !slices.Equal(tcpGaps, want) {
		t.Errorf("TCP gaps %v, truth %v", tcpGaps, want)
	}
	if want := f.SequenceGaps(0); !slices.Equal(seqGaps, want) {
		t.Errorf("sequence gaps %v, truth %v", seqGaps, want)
	}
	if n := countKind(out.events, hwoffload.KindSeqGap); uint64(n) != dev.Counters().StepSeqGaps || n == 0 {
		t.Errorf("%d sequence gap events, STEP_SEQ_GAPS %d", n, dev.Counters().StepSeqGaps)
	}
	if c := dev.Counters(); c.MirrorGapBytes == 0 {
		t.Errorf("MIRROR_GAP_BYTES 0 with %d gaps", gaps)
	}
}

// gated is a frame source that gives its first frames, then nothing until
// opened, then the rest.
type gated struct {
	frames []capgen.Frame
	next   int
	stopAt int
	open   atomic.Bool
}

func (g *gated) ReadFrames(fs []frame.Frame) (int, error) {
	limit := len(g.frames)
	if !g.open.Load() {
		limit = g.stopAt
	}
	n := 0
	for n < len(fs) && g.next < limit {
		f := g.frames[g.next]
		fs[n].N = copy(fs[n].Buf, f.Data)
		fs[n].WireLen, fs[n].Time, fs[n].LinkType = len(f.Data), f.Time, frame.LinkTypeEthernet
		n++
		g.next++
	}
	if g.next == len(g.frames) {
		return n, io.EOF
	}
	return n, nil
}

func (g *gated) Close() error { return nil }

// TestFullRing: a ring that fills drops and counts, and the seq of the next
// record written shows how many.
func TestFullRing(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 400, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	src := &gated{frames: f.Frames, stopAt: len(f.Frames) / 2}
	_, dev := start(t, src, 4)
	ctx := ctxT(t)
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for dev.Counters().RxFrames < uint64(src.stopAt) {
		if ctx.Err() != nil {
			t.Fatal("the twin did not take the first half")
		}
		time.Sleep(time.Millisecond)
	}
	r := dev.Ring(hwoffload.RingTrades)
	trades1 := dev.Counters().Trades
	if trades1 <= 16 {
		t.Fatalf("only %d trades in the first half", trades1)
	}
	if d := r.Dropped(); uint64(d) != trades1-16 {
		t.Errorf("DROPPED %d, want %d trades - 16 slots", d, trades1)
	}
	for i := range 16 {
		s, lost, ok := r.Read()
		if !ok || lost != 0 || s.Seq() != uint64(i) {
			t.Fatalf("read %d: ok %v lost %d seq %d", i, ok, lost, s.Seq())
		}
	}
	if _, _, ok := r.Read(); ok { // also releases the 16th slot
		t.Fatal("a 17th record in a ring of 16")
	}
	src.open.Store(true)
	s, lost, err := r.Wait(ctx, 100*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq() != trades1 || lost != trades1-16 {
		t.Errorf("first record after the drops: seq %d lost %d, want %d and %d", s.Seq(), lost, trades1, trades1-16)
	}
	if r.Lost() != lost {
		t.Errorf("Lost %d", r.Lost())
	}
}

// TestReset: RESET empties rings, counters, latency and ERROR and keeps the
// configuration.
func TestReset(t *testing.T) {
	_, path := capture(t, capgen.Options{Messages: 200, Seed: 4})
	_, dev := start(t, openPcap(t, path), 12)
	ctx := ctxT(t)
	if err := dev.Configure(hwoffload.Config{MirrorServer: netipAddrPort("10.31.0.1:0")}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	if dev.Counters().Trades == 0 || dev.Ring(0).Pending() == 0 {
		t.Fatal("nothing decoded")
	}
	dev.Write32(hwoffload.RegVersion, 9) // an error for RESET to clear
	if err := waitErr(ctx, dev, hwoffload.CodeReadOnly); err != nil {
		t.Fatal(err)
	}
	if err := dev.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if c := dev.Counters(); c != (hwoffload.Counters{}) {
		t.Errorf("counters after RESET: %+v", c)
	}
	if l := dev.Latency(); l != (hwoffload.Latency{}) {
		t.Errorf("latency after RESET: %+v", l)
	}
	if err := dev.Err(); err != nil || dev.Status()&hwoffload.StatusError != 0 {
		t.Errorf("after RESET: %v, STATUS %#x", err, dev.Status())
	}
	for k := range hwoffload.NumRings {
		r := dev.Ring(k)
		if _, _, ok := r.Read(); ok || r.Pending() != 0 || r.Dropped() != 0 || dev.Read32(hwoffload.RingReg(k, hwoffload.RingProd)) != 0 {
			t.Errorf("ring %d not empty after RESET", k)
		}
	}
	if dev.Read32(hwoffload.RegMirrorServerIP) != 0x0a1f0001 || dev.Read64(hwoffload.RingReg(1, hwoffload.RingBase)) == 0 {
		t.Error("RESET lost the configuration or BASE")
	}
}
