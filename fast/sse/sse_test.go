package sse

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/cmd/fastgen/gen"
	"github.com/tickwire/tickwire/fast/sse/step"
)

var fix = flag.Bool("fix", false, "rewrite sse_gen.go when it is stale")

// TestGenerated fails when sse_gen.go is not what fastgen makes of
// templates.xml; "go test . -run=^TestGenerated$ -fix" rewrites it.
//
//go:generate go test . -run=^TestGenerated$ -fix
func TestGenerated(t *testing.T) {
	ts, err := fast.ParseTemplates(TemplatesXML)
	if err != nil {
		t.Fatal(err)
	}
	want, err := gen.Generate(ts, gen.Options{Package: "sse", Source: "templates.xml"})
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("sse_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(have, want) {
		return
	}
	if *fix {
		if err := os.WriteFile("sse_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote sse_gen.go")
		return
	}
	t.Fatal("sse_gen.go is stale: run go generate ./fast/sse (or go test ./fast/sse -run=^TestGenerated$ -fix)")
}

// market produces realistic records: a few securities, rising indexes and
// times, prices near a base, lots of 100 shares.
type market struct {
	r          *rand.Rand
	tradeIndex uint32
	orderIndex uint32
	biz        uint64
	orderNo    uint64
	time       uint32
}

var securities = []string{"600000", "600036", "601318", "688981", "510300"}

func newMarket(seed uint64) *market {
	return &market{r: rand.New(rand.NewPCG(seed, 1)), time: 9300000}
}

func (mk *market) tick() {
	if mk.r.IntN(4) == 0 {
		mk.time++
	}
	mk.biz++
}

func (mk *market) trade() Trade {
	mk.tick()
	mk.tradeIndex++
	price := Price(10000 + mk.r.IntN(5000))
	qty := Qty(100000 * (1 + mk.r.IntN(50)))
	t := Trade{
		TradeIndex: mk.tradeIndex, TradeChannel: 1, HasTradeChannel: true,
		SecurityID: SecurityID(securities[mk.r.IntN(len(securities))]),
		TradeTime:  Time(mk.time), HasTradeTime: true,
		TradePrice: price, HasTradePrice: true,
		TradeQty: qty, HasTradeQty: true,
		TradeMoney: Money(int64(price) * int64(qty) / 10), HasTradeMoney: true,
		TradeBuyNo: mk.orderNo + 1, HasTradeBuyNo: true,
		TradeSellNo: mk.orderNo + 2, HasTradeSellNo: true,
		TradeBSFlag: "BSN"[mk.r.IntN(3)], HasTradeBSFlag: true,
		BizIndex: mk.biz,
	}
	return t
}

func (mk *market) order() Order {
	mk.tick()
	mk.orderIndex++
	mk.orderNo += uint64(1 + mk.r.IntN(3))
	o := Order{
		OrderIndex: mk.orderIndex, OrderChannel: 1, HasOrderChannel: true,
		SecurityID: SecurityID(securities[mk.r.IntN(len(securities))]),
		OrderTime:  Time(mk.time), HasOrderTime: true,
		OrderType: "AAAD"[mk.r.IntN(4)], OrderNO: mk.orderNo,
		OrderPrice: Price(10000 + mk.r.IntN(5000)), HasOrderPrice: true,
		Balance: Qty(100000 * (1 + mk.r.IntN(50))), HasBalance: true,
		OrderBSFlag: "BS"[mk.r.IntN(2)], BizIndex: mk.biz,
	}
	return o
}

// edgeTrade returns a trade with random edge values and random absences.
func edgeTrade(r *rand.Rand) Trade {
	u32 := []uint32{0, 1, 127, 128, math.MaxUint32 - 1, math.MaxUint32}
	u64 := []uint64{0, 1, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}
	i32 := []int32{0, -1, 63, 64, -64, -65, math.MinInt32, math.MaxInt32}
	i64 := []int64{0, -1, math.MinInt64, math.MaxInt64, 1 << 40}
	ids := []string{"", "6", "600000", "\x7f\x01\x00\x00\x001", "A B C"}
	flags := []byte{0, 'B', 'S', 'N', 0x7f}
	b := func() bool { return r.IntN(3) > 0 }
	return Trade{
		DataStatus: i32[r.IntN(len(i32))], HasDataStatus: b(),
		TradeIndex:   u32[r.IntN(len(u32))],
		TradeChannel: u32[r.IntN(len(u32))], HasTradeChannel: b(),
		SecurityID: SecurityID(ids[r.IntN(len(ids))]),
		TradeTime:  Time(u32[r.IntN(len(u32))]), HasTradeTime: b(),
		TradePrice: Price(i32[r.IntN(len(i32))]), HasTradePrice: b(),
		TradeQty: Qty(i64[r.IntN(len(i64))]), HasTradeQty: b(),
		TradeMoney: Money(i64[r.IntN(len(i64))]), HasTradeMoney: b(),
		TradeBuyNo: u64[r.IntN(len(u64))], HasTradeBuyNo: b(),
		TradeSellNo: u64[r.IntN(len(u64))], HasTradeSellNo: b(),
		TradeBSFlag: flags[r.IntN(len(flags))], HasTradeBSFlag: b(),
		BizIndex: u64[r.IntN(len(u64))],
	}
}

func edgeOrder(r *rand.Rand) Order {
	t := edgeTrade(r)
	return Order{
		OrderIndex: t.TradeIndex, OrderChannel: t.TradeChannel, HasOrderChannel: t.HasTradeChannel,
		SecurityID: t.SecurityID, OrderTime: t.TradeTime, HasOrderTime: t.HasTradeTime,
		OrderType: t.TradeBSFlag, OrderNO: t.TradeBuyNo,
		OrderPrice: Price(uint32(t.TradeTime)), HasOrderPrice: t.HasTradePrice,
		Balance: Qty(t.TradeSellNo >> 1), HasBalance: t.HasTradeQty,
		OrderBSFlag: t.TradeBSFlag, BizIndex: t.BizIndex,
	}
}

// normalize clears the value of absent optional fields, which the decoder
// reports as zero.
func normTrade(t Trade) Trade {
	if !t.HasDataStatus {
		t.DataStatus = 0
	}
	if !t.HasTradeChannel {
		t.TradeChannel = 0
	}
	if !t.HasTradeTime {
		t.TradeTime = 0
	}
	if !t.HasTradePrice {
		t.TradePrice = 0
	}
	if !t.HasTradeQty {
		t.TradeQty = 0
	}
	if !t.HasTradeMoney {
		t.TradeMoney = 0
	}
	if !t.HasTradeBuyNo {
		t.TradeBuyNo = 0
	}
	if !t.HasTradeSellNo {
		t.TradeSellNo = 0
	}
	if !t.HasTradeBSFlag {
		t.TradeBSFlag = 0
	}
	return t
}

func normOrder(o Order) Order {
	if !o.HasOrderChannel {
		o.OrderChannel = 0
	}
	if !o.HasOrderTime {
		o.OrderTime = 0
	}
	if !o.HasOrderPrice {
		o.OrderPrice = 0
	}
	if !o.HasBalance {
		o.Balance = 0
	}
	return o
}

// collect keeps copies of everything a FeedDecoder reports.
type collect struct {
	trades []Trade
	orders []Order
	gaps   []string
	all    []string // records in order
}

func (c *collect) OnTrade(t *Trade) {
	c.trades = append(c.trades, *t)
	c.all = append(c.all, t.String())
}
func (c *collect) OnOrder(o *Order) {
	c.orders = append(c.orders, *o)
	c.all = append(c.all, o.String())
}
func (c *collect) OnGap(cat uint32, exp, got uint64) {
	c.gaps = append(c.gaps, fmt.Sprintf("%d:%d->%d", cat, exp, got))
}

func TestRecordRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var enc Encoder
	var dec Decoder
	for round := range 300 {
		enc.Reset()
		dec.Reset()
		var buf []byte
		var wantT []Trade
		var wantO []Order
		for range 1 + r.IntN(8) {
			var err error
			if r.IntN(2) == 0 {
				tr := edgeTrade(r)
				if r.IntN(2) == 0 && len(wantT) > 0 {
					// exercise increment and copy with a clear bit
					prev := wantT[len(wantT)-1]
					tr.TradeIndex, tr.BizIndex = prev.TradeIndex+1, prev.BizIndex+1
					tr.SecurityID, tr.TradeChannel, tr.HasTradeChannel = prev.SecurityID, prev.TradeChannel, prev.HasTradeChannel
				}
				buf, err = enc.AppendTrade(buf, &tr)
				wantT = append(wantT, normTrade(tr))
			} else {
				o := edgeOrder(r)
				buf, err = enc.AppendOrder(buf, &o)
				wantO = append(wantO, normOrder(o))
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		c := &collect{}
		off := 0
		for off < len(buf) {
			next, err := dec.DecodeRecord(buf, off, c)
			if err != nil {
				t.Fatalf("round %d: decode at %d: %v\n% x", round, off, err, buf)
			}
			off = next
		}
		if len(c.trades) != len(wantT) || len(c.orders) != len(wantO) {
			t.Fatalf("round %d: %d trades %d orders, want %d %d", round, len(c.trades), len(c.orders), len(wantT), len(wantO))
		}
		for i := range wantT {
			if c.trades[i] != wantT[i] {
				t.Fatalf("round %d trade %d:\n got %+v\nwant %+v", round, i, c.trades[i], wantT[i])
			}
		}
		for i := range wantO {
			if c.orders[i] != wantO[i] {
				t.Fatalf("round %d order %d:\n got %+v\nwant %+v", round, i, c.orders[i], wantO[i])
			}
		}
	}
}

func TestEncodeLeadingNUL(t *testing.T) {
	var enc Encoder
	tr := Trade{SecurityID: SecurityID("\x00A")}
	if _, err := enc.AppendTrade(nil, &tr); !errors.Is(err, fast.ErrNotEncodable) {
		t.Fatalf("got %v", err)
	}
	tr.SecurityID = SecurityID("\x00") // one NUL is all padding: the empty string
	if _, err := enc.AppendTrade(nil, &tr); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeRange(t *testing.T) {
	var enc Encoder
	o := Order{OrderPrice: Price(math.MaxUint32 + 1), HasOrderPrice: true}
	out, err := enc.AppendOrder([]byte("x"), &o)
	var ee *EncodeError
	if !errors.As(err, &ee) || ee.Field != "OrderPrice" || !errors.Is(err, fast.ErrRange) || string(out) != "x" {
		t.Fatalf("got %q, %v", out, err)
	}
	o.HasOrderPrice = false // absent: the value is not written, so not checked
	if _, err := enc.AppendOrder(nil, &o); err != nil {
		t.Fatal(err)
	}
}

// TestKnownBytes pins the wire format with hand-assembled records, checked
// against both the decoder and the encoder (whose presence maps are minimal).
func TestKnownBytes(t *testing.T) {
	wire := []byte{
		// Record 1. pmap bits: TID 1, DataStatus 0, TradeIndex 1,
		// TradeChannel 1, SecurityID 1, TradeTime 1, TradePrice 1 |
		// TradeQty 1, TradeMoney 0, TradeBuyNo 0, TradeSellNo 0,
		// TradeBSFlag 1, BizIndex 1.
		0x5f, 0xc6,
		0x19, 0x81, // template id 3201
		0x85,                               // TradeIndex 5
		0x82,                               // TradeChannel 1 (nullable: 2)
		0x36, 0x30, 0x30, 0x30, 0x30, 0xb0, // SecurityID "600000"
		0x04, 0x37, 0x50, 0xad, // TradeTime 09:30:00.12 (nullable: 9300013)
		0x00, 0x60, 0xba, // TradePrice 12.345 (nullable: 12346, sign-extended)
		0x06, 0x0d, 0xa1, // TradeQty 100.000 (nullable: 100001)
		0xc2,       // TradeBSFlag "B"
		0x09, 0xa0, // BizIndex 1184
		// Record 2: only TradePrice on the wire; the template id is
		// copied, TradeIndex and BizIndex incremented, the rest copied or
		// absent.
		0x81,
		0x00, 0x60, 0xbf, // TradePrice 12.350
	}
	want := []Trade{{
		TradeIndex: 5, TradeChannel: 1, HasTradeChannel: true, SecurityID: SecurityID("600000"),
		TradeTime: 9300012, HasTradeTime: true, TradePrice: 12345, HasTradePrice: true,
		TradeQty: 100000, HasTradeQty: true, TradeBSFlag: 'B', HasTradeBSFlag: true, BizIndex: 1184,
	}, {
		TradeIndex: 6, TradeChannel: 1, HasTradeChannel: true, SecurityID: SecurityID("600000"),
		TradeTime: 9300012, HasTradeTime: true, TradePrice: 12350, HasTradePrice: true, BizIndex: 1185,
	}}
	var dec Decoder
	c := &collect{}
	for off := 0; off < len(wire); {
		next, err := dec.DecodeRecord(wire, off, c)
		if err != nil {
			t.Fatal(err)
		}
		off = next
	}
	if len(c.trades) != 2 || c.trades[0] != want[0] || c.trades[1] != want[1] {
		t.Fatalf("decoded %+v\nwant %+v", c.trades, want)
	}
	if got := c.all[0]; got != "trade 600000 idx=5 ch=1 09:30:00.12 12.345x100.000 B biz=1184" {
		t.Fatalf("String() = %q", got)
	}
	var enc Encoder
	var out []byte
	for i := range want {
		var err error
		if out, err = enc.AppendTrade(out, &want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out, wire) {
		t.Fatalf("encoded\n% x\nwant\n% x", out, wire)
	}
	// With ExplicitTemplateID the second record carries 19 81 too.
	enc = Encoder{ExplicitTemplateID: true}
	out = out[:0]
	for i := range want {
		out, _ = enc.AppendTrade(out, &want[i])
	}
	explicit := append(bytes.Clone(wire[:25]), 0xc1, 0x19, 0x81, 0x00, 0x60, 0xbf)
	if !bytes.Equal(out, explicit) {
		t.Fatalf("explicit template ids\n% x\nwant\n% x", out, explicit)
	}
	// 5801's template id is 2d a9.
	out, _ = enc.AppendOrder(out[:0], &Order{})
	if !bytes.Equal(out[2:4], []byte{0x2d, 0xa9}) { // after a 2-byte pmap
		t.Fatalf("order record starts % x", out)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		wire []byte
		code string
		is   error
	}{
		{"no template id", []byte{0x80}, "D5", fast.ErrNoPrevious},
		{"unknown template", []byte{0xc0, 0x19, 0x82}, "D9", fast.ErrUnknownTemplate},
		// TradeIndex bit clear in the first record: increment without a
		// previous value.
		{"increment undefined", []byte{0xc0, 0x19, 0x81}, "D5", fast.ErrNoPrevious},
		{"short", []byte{0xf0, 0x19, 0x81, 0x81}, "SHORT", fast.ErrShort},
		{"overflow", []byte{0xe0, 0x19, 0x81, 0x10, 0x7f, 0x7f, 0x7f, 0xff}, "D2", fast.ErrOverflow},
		{"string too long", []byte{0xdc, 0x19, 0x81, 0x81, 0x81, '1', '2', '3', '4', '5', '6', 0xb7}, "LIMIT", fast.ErrLimit},
		{"pmap too long", bytes.Repeat([]byte{0}, 40), "LIMIT", fast.ErrLimit},
	}
	for _, tc := range cases {
		var dec Decoder
		_, err := dec.DecodeRecord(tc.wire, 0, &collect{})
		var de *fast.DecodeError
		if !errors.As(err, &de) || de.Code != tc.code || !errors.Is(err, tc.is) {
			t.Errorf("%s: got %v (%#v), want code %q wrapping %v", tc.name, err, de, tc.code, tc.is)
			continue
		}
		// Sticky until Reset.
		if _, err2 := dec.DecodeRecord([]byte{0xc0, 0x19, 0x81}, 0, &collect{}); err2 != err {
			t.Errorf("%s: error not sticky: %v", tc.name, err2)
		}
	}
}

// feed encodes n STEP messages of 1..maxRecords records each, trades and
// orders mixed, and returns the stream and the records in order.
func feed(seed uint64, n, maxRecords int) (stream []byte, want []string) {
	mk := newMarket(seed)
	fe := NewFeedEncoder()
	fe.Header.SendingTime = []byte("20260105-09:30:00.000")
	var trades []Trade
	var orders []Order
	for range n {
		k := 1 + mk.r.IntN(maxRecords)
		var err error
		if mk.r.IntN(3) == 0 {
			trades = trades[:0]
			for range k {
				tr := mk.trade()
				trades = append(trades, tr)
				want = append(want, tr.String())
			}
			stream, err = fe.AppendTrades(stream, trades)
		} else {
			orders = orders[:0]
			for range k {
				o := mk.order()
				orders = append(orders, o)
				want = append(want, o.String())
			}
			stream, err = fe.AppendOrders(stream, orders)
		}
		if err != nil {
			panic(err)
		}
	}
	return stream, want
}

func TestFeedExplicitTemplateID(t *testing.T) {
	mk := newMarket(10)
	trades := []Trade{mk.trade(), mk.trade()}
	for _, explicit := range []bool{false, true} {
		fe := NewFeedEncoder()
		fe.ExplicitTemplateID = explicit
		stream, err := fe.AppendTrades(nil, trades)
		if err != nil {
			t.Fatal(err)
		}
		p := step.NewParser(step.Config{})
		p.Feed(stream)
		m, _ := p.Next()
		if n := bytes.Count(m.Payload, []byte{0x19, 0x81}); (n == 2) != explicit {
			t.Errorf("explicit %v: template id %d times in % x", explicit, n, m.Payload)
		}
		c := &collect{}
		if err := NewFeedDecoder(FeedConfig{}, c).Feed(stream); err != nil || len(c.trades) != 2 {
			t.Errorf("explicit %v: %v, %d trades", explicit, err, len(c.trades))
		}
	}
}

func TestFeedRoundTrip(t *testing.T) {
	stream, want := feed(1, 200, 20)
	for _, size := range []int{1, 13, 1408, len(stream)} {
		c := &collect{}
		fd := NewFeedDecoder(FeedConfig{}, c)
		for off := 0; off < len(stream); off += size {
			if err := fd.Feed(stream[off:min(off+size, len(stream))]); err != nil {
				t.Fatalf("chunk %d: %v", size, err)
			}
		}
		if fmt.Sprint(c.all) != fmt.Sprint(want) || len(c.gaps) != 0 {
			t.Fatalf("chunk %d: %d records (want %d), gaps %v", size, len(c.all), len(want), c.gaps)
		}
		st := fd.Stats()
		if st.Trades+st.Orders != uint64(len(want)) || st.STEP.Messages != 200 || st.DecodeErrors != 0 {
			t.Fatalf("chunk %d: stats %+v", size, st)
		}
	}
}

type stepCollector struct {
	collect
	offsets []int64
}

func (s *stepCollector) OnStep(m *step.Message) { s.offsets = append(s.offsets, m.Offset) }

func TestFeedOnStep(t *testing.T) {
	stream, want := feed(6, 3, 2)
	c := &stepCollector{}
	fd := NewFeedDecoder(FeedConfig{}, c)
	if err := fd.Feed(stream); err != nil {
		t.Fatal(err)
	}
	p := step.NewParser(step.Config{})
	p.Feed(stream)
	var offsets []int64
	for m, _ := p.Next(); m != nil; m, _ = p.Next() {
		offsets = append(offsets, m.Offset)
	}
	if fmt.Sprint(c.offsets) != fmt.Sprint(offsets) || len(offsets) != 3 || len(c.all) != len(want) {
		t.Fatalf("OnStep offsets %v, want %v", c.offsets, offsets)
	}
}

func TestFeedGapsAndErrors(t *testing.T) {
	fe := NewFeedEncoder()
	mk := newMarket(2)
	var msgs [][]byte
	for i := range 6 {
		var m []byte
		if i%2 == 0 {
			m, _ = fe.AppendTrades(nil, []Trade{mk.trade(), mk.trade()})
		} else {
			m, _ = fe.AppendOrders(nil, []Order{mk.order()})
		}
		msgs = append(msgs, m)
	}
	// A message whose FAST payload is corrupt (truncated record) but whose
	// STEP framing is fine, and one with an unknown template (5803).
	bad := step.AppendMessage(nil, &step.Header{MsgType: []byte("UA3201")}, []byte{0xf0, 0x19, 0x81, 0x81})
	unknown := step.AppendMessage(nil, &step.Header{MsgType: []byte("UA5803")}, []byte{0xc0, 0x2d, 0xab, 0x80})
	// SecurityID longer than its 6 characters: a bound of the typed path.
	long := step.AppendMessage(nil, &step.Header{MsgType: []byte("UA3201")}, []byte{0xdc, 0x19, 0x81, 0x81, 0x81, '1', '2', '3', '4', '5', '6', 0xb7})

	c := &collect{}
	fd := NewFeedDecoder(FeedConfig{}, c)
	var errs []error
	// Message 2 (trades, category seq 2) is lost in a TCP gap.
	for _, m := range [][]byte{msgs[0], msgs[1], bad, unknown, long, msgs[3], msgs[4][:20]} {
		if err := fd.Feed(m); err != nil {
			errs = append(errs, err)
		}
	}
	fd.Discontinuity(int64(len(msgs[4]) - 20 + len(msgs[5])))
	// Trades 2 and 3 and order 3 are lost; the next of each reports it.
	last, _ := fe.AppendTrades(nil, []Trade{mk.trade()})
	last, _ = fe.AppendOrders(last, []Order{mk.order()})
	if err := fd.Feed(last); err != nil {
		errs = append(errs, err)
	}
	if fmt.Sprint(c.gaps) != "[7:2->4 58:3->4]" {
		t.Errorf("gaps %v", c.gaps)
	}
	var fe2 *FeedError
	if len(errs) != 2 || !errors.As(errs[0], &fe2) || !errors.Is(errs[0], fast.ErrShort) || !errors.Is(errs[1], fast.ErrLimit) {
		t.Errorf("errors %v", errs)
	}
	st := fd.Stats()
	if st.DecodeErrors != 2 || st.LimitHits != 1 || st.UnknownTemplate != 1 || st.Trades != 3 || st.Orders != 3 || st.STEP.Gaps != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	stream, want := feed(3, 50, 30)
	fd := NewFeedDecoder(FeedConfig{}, nopHandler{})
	if a := testing.AllocsPerRun(20, func() {
		for off := 0; off < len(stream); off += 1408 {
			if err := fd.Feed(stream[off:min(off+1408, len(stream))]); err != nil {
				t.Fatal(err)
			}
		}
	}); a != 0 {
		t.Fatalf("FeedDecoder.Feed: %v allocations per stream", a)
	}
	if got := fd.Stats().Trades + fd.Stats().Orders; got != uint64(21*len(want)) {
		t.Fatalf("decoded %d records, want %d", got, 21*len(want))
	}

	mk := newMarket(4)
	trades := []Trade{mk.trade(), mk.trade(), mk.trade()}
	orders := []Order{mk.order(), mk.order()}
	fe := NewFeedEncoder()
	buf := make([]byte, 0, 4096)
	buf, _ = fe.AppendTrades(buf, trades) // warm up the scratch buffers
	buf, _ = fe.AppendOrders(buf, orders)
	if a := testing.AllocsPerRun(100, func() {
		out, _ := fe.AppendTrades(buf[:0], trades)
		_, _ = fe.AppendOrders(out, orders)
	}); a != 0 {
		t.Fatalf("FeedEncoder: %v allocations", a)
	}
}

// TestFeedDecodersShareADecoder: FeedDecoders of two streams that share one
// Decoder, fed in interleaved chunks that cut messages, decode what each
// would alone and count their own records; between messages they hold no
// STEP buffer.
func TestFeedDecodersShareADecoder(t *testing.T) {
	var shared Decoder
	streams := [2][]byte{}
	wants := [2][]string{}
	streams[0], wants[0] = feed(11, 40, 6)
	streams[1], wants[1] = feed(12, 30, 9)
	var cs [2]collect
	var fds [2]*FeedDecoder
	for i := range fds {
		fds[i] = NewFeedDecoder(FeedConfig{Decoder: &shared}, &cs[i])
	}
	for off := 0; off < max(len(streams[0]), len(streams[1])); off += 333 {
		for i, s := range streams {
			if off < len(s) {
				if err := fds[i].Feed(s[off:min(off+333, len(s))]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i := range fds {
		if fmt.Sprint(cs[i].all) != fmt.Sprint(wants[i]) {
			t.Errorf("stream %d: decoded\n%v\nwant\n%v", i, cs[i].all, wants[i])
		}
		if st := fds[i].Stats(); st.Trades+st.Orders != uint64(len(wants[i])) {
			t.Errorf("stream %d: stats %+v, want %d records", i, st, len(wants[i]))
		}
		if fds[i].Held() != 0 {
			t.Errorf("stream %d: %d bytes held at the end of the stream", i, fds[i].Held())
		}
	}
}

type nopHandler struct{}

func (nopHandler) OnTrade(*Trade)               {}
func (nopHandler) OnOrder(*Order)               {}
func (nopHandler) OnGap(uint32, uint64, uint64) {}

// FuzzFeed feeds arbitrary bytes through the whole feed path (STEP framing,
// dictionary reset, typed decoding) in arbitrary chunks: no panic, and the
// records and gaps do not depend on how the stream is split.
func FuzzFeed(f *testing.F) {
	stream, _ := feed(8, 3, 3)
	f.Add(stream, uint8(5))
	f.Add(stream[:len(stream)/2], uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		run := func(size int) *collect {
			c := &collect{}
			fd := NewFeedDecoder(FeedConfig{STEP: step.Config{MaxMessageSize: 512}}, c)
			for off := 0; off < len(data); off += size {
				_ = fd.Feed(data[off:min(off+size, len(data))])
			}
			if st := fd.Stats(); st.Trades+st.Orders != uint64(len(c.all)) {
				t.Fatalf("stats %+v, %d records delivered", st, len(c.all))
			}
			return c
		}
		whole, split := run(max(len(data), 1)), run(int(chunk)%97+1)
		if fmt.Sprint(whole.all, whole.gaps) != fmt.Sprint(split.all, split.gaps) {
			t.Fatalf("chunking changes the result:\n%v %v\n%v %v", whole.all, whole.gaps, split.all, split.gaps)
		}
	})
}
