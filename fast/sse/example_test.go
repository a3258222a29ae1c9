package sse_test

import (
	"encoding/json"
	"expvar"
	"fmt"

	"github.com/tickwire/tickwire/fast/sse"
)

// printer is a FeedHandler that prints what it receives.
type printer struct{}

func (printer) OnTrade(t *sse.Trade) { fmt.Println(t) }
func (printer) OnOrder(o *sse.Order) { fmt.Println(o) }
func (printer) OnGap(category uint32, expected, got uint64) {
	fmt.Printf("gap in category %d: expected %d, got %d\n", category, expected, got)
}

// A feed generator builds STEP messages with FeedEncoder; a feed handler
// decodes the byte stream, in chunks of any size, with FeedDecoder.
func ExampleFeedDecoder() {
	fe := sse.NewFeedEncoder()
	fe.Header.SendingTime = []byte("20260105-09:30:00.000")
	orders := []sse.Order{{
		OrderIndex: 1, OrderChannel: 1, HasOrderChannel: true, SecurityID: sse.SecurityID("600000"),
		OrderTime: 9300000, HasOrderTime: true, OrderType: 'A', OrderNO: 1001,
		OrderPrice: 10250, HasOrderPrice: true, Balance: 500000, HasBalance: true,
		OrderBSFlag: 'B', BizIndex: 1,
	}}
	trades := []sse.Trade{{
		TradeIndex: 1, TradeChannel: 1, HasTradeChannel: true, SecurityID: sse.SecurityID("600000"),
		TradeTime: 9300001, HasTradeTime: true, TradePrice: 10250, HasTradePrice: true,
		TradeQty: 200000, HasTradeQty: true, TradeMoney: 205000000, HasTradeMoney: true,
		TradeBuyNo: 1001, HasTradeBuyNo: true, TradeSellNo: 998, HasTradeSellNo: true,
		TradeBSFlag: 'B', HasTradeBSFlag: true, BizIndex: 2,
	}}
	stream, err := fe.AppendOrders(nil, orders)
	if err != nil {
		panic(err)
	}
	stream, err = fe.AppendTrades(stream, trades)
	if err != nil {
		panic(err)
	}
	fe.TradeSeq++ // a trade message lost on the way
	stream, _ = fe.AppendTrades(stream, trades)

	fd := sse.NewFeedDecoder(sse.FeedConfig{}, printer{})
	for len(stream) > 0 {
		n := min(50, len(stream)) // TCP may split the stream anywhere
		if err := fd.Feed(stream[:n]); err != nil {
			fmt.Println(err)
		}
		stream = stream[n:]
	}
	st := fd.Stats()
	fmt.Println(st.STEP.Messages, "messages,", st.Trades, "trades,", st.Orders, "orders")
	// Output:
	// order 600000 idx=1 ch=1 09:30:00.00 A B 10.250x500.000 no=1001 biz=1
	// trade 600000 idx=1 ch=1 09:30:00.01 10.250x200.000=2050.00000 buy=1001 sell=998 B biz=2
	// gap in category 7: expected 2, got 3
	// trade 600000 idx=1 ch=1 09:30:00.01 10.250x200.000=2050.00000 buy=1001 sell=998 B biz=2
	// 3 messages, 2 trades, 1 orders
}

// Fixed-point values print with their implied decimals.
func ExamplePrice() {
	fmt.Println(sse.Price(12345), sse.Qty(100000), sse.Money(-123456789), sse.Time(14595999))
	// Output: 12.345 100.000 -1234.56789 14:59:59.99
}

// The typed Decoder works on FAST records without STEP framing too.
func ExampleDecoder() {
	var enc sse.Encoder
	t := sse.Trade{TradeIndex: 7, SecurityID: sse.SecurityID("688981"), TradePrice: 55120, HasTradePrice: true, BizIndex: 70}
	record, _ := enc.AppendTrade(nil, &t)
	fmt.Printf("% x\n", record)

	var dec sse.Decoder
	n, err := dec.DecodeRecord(record, 0, printer{})
	fmt.Println(n, err)
	// Output:
	// 55 82 19 81 87 36 38 38 39 38 b1 03 2e d1 c6
	// trade 688981 idx=7 55.120 biz=70
	// 15 <nil>
}

// Publishing a FeedDecoder's counters with expvar: the goroutine that feeds
// the decoder copies them into a FeedStatsVar, which expvar reads on its own.
func ExampleFeedStatsVar() {
	fe := sse.NewFeedEncoder()
	stream, err := fe.AppendOrders(nil, []sse.Order{{OrderIndex: 1, SecurityID: sse.SecurityID("600000"), OrderType: 'A', OrderBSFlag: 'B'}})
	if err != nil {
		panic(err)
	}
	v := new(sse.FeedStatsVar)
	expvar.Publish("feed-example", v)
	fd := sse.NewFeedDecoder(sse.FeedConfig{}, printer{})
	fd.Feed(stream)
	v.Set(fd.Stats()) // after each chunk, or every so often

	var st sse.FeedStats
	if err := json.Unmarshal([]byte(expvar.Get("feed-example").String()), &st); err != nil {
		panic(err)
	}
	fmt.Println(st.STEP.Messages, "message,", st.Orders, "order")
	// Output:
	// order 600000 idx=1 A B no=0 biz=0
	// 1 message, 1 order
}
