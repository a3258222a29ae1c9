package capgen

import (
	"math"
	"math/rand/v2"

	"github.com/tickwire/tickwire/fast/sse"
)

// Trade is one UA3201 (tick-by-tick trade) record in plain form, the form of
// the truth file and of mirrorfeed's JSON output: sse.Trade with strings for
// the SecurityID and flags. Prices and quantities are integers with the
// exchange's implied decimals. Optional fields that are absent are zero
// (the generator always sends them).
type Trade struct {
	TradeIndex   uint32 `json:"TradeIndex"`
	TradeChannel uint32 `json:"TradeChannel"`
	SecurityID   string `json:"SecurityID"`
	TradeTime    uint32 `json:"TradeTime"`  // HHMMSSss
	TradePrice   int64  `json:"TradePrice"` // 3 implied decimals
	TradeQty     int64  `json:"TradeQty"`   // 3 implied decimals
	TradeMoney   int64  `json:"TradeMoney"` // 5 implied decimals
	TradeBuyNo   uint64 `json:"TradeBuyNo"`
	TradeSellNo  uint64 `json:"TradeSellNo"`
	TradeBSFlag  string `json:"TradeBSFlag"` // "B", "S" or "N"
	BizIndex     uint64 `json:"BizIndex"`
}

// Order is one UA5801 (tick-by-tick order) record in plain form.
type Order struct {
	OrderIndex   uint32 `json:"OrderIndex"`
	OrderChannel uint32 `json:"OrderChannel"`
	SecurityID   string `json:"SecurityID"`
	OrderTime    uint32 `json:"OrderTime"` // HHMMSSss
	OrderType    string `json:"OrderType"` // "A" add, "D" delete
	OrderNO      uint64 `json:"OrderNO"`
	OrderPrice   int64  `json:"OrderPrice"` // 3 implied decimals
	Balance      int64  `json:"Balance"`    // 3 implied decimals
	OrderBSFlag  string `json:"OrderBSFlag"`
	BizIndex     uint64 `json:"BizIndex"`
}

// TradeOf returns t in plain form.
func TradeOf(t *sse.Trade) Trade {
	return Trade{
		TradeIndex:   t.TradeIndex,
		TradeChannel: t.TradeChannel,
		SecurityID:   t.Security(),
		TradeTime:    uint32(t.TradeTime),
		TradePrice:   int64(t.TradePrice),
		TradeQty:     int64(t.TradeQty),
		TradeMoney:   int64(t.TradeMoney),
		TradeBuyNo:   t.TradeBuyNo,
		TradeSellNo:  t.TradeSellNo,
		TradeBSFlag:  flagString(t.TradeBSFlag, t.HasTradeBSFlag),
		BizIndex:     t.BizIndex,
	}
}

// OrderOf returns o in plain form.
func OrderOf(o *sse.Order) Order {
	return Order{
		OrderIndex:   o.OrderIndex,
		OrderChannel: o.OrderChannel,
		SecurityID:   o.Security(),
		OrderTime:    uint32(o.OrderTime),
		OrderType:    flagString(o.OrderType, true),
		OrderNO:      o.OrderNO,
		OrderPrice:   int64(o.OrderPrice),
		Balance:      int64(o.Balance),
		OrderBSFlag:  flagString(o.OrderBSFlag, true),
		BizIndex:     o.BizIndex,
	}
}

// flagStrings holds every one-byte string, so converting a flag allocates
// nothing.
var flagStrings = func() (s [256]string) {
	for i := range s {
		s[i] = string([]byte{byte(i)})
	}
	return s
}()

func flagString(b byte, present bool) string {
	if !present || b == 0 {
		return ""
	}
	return flagStrings[b]
}

// STEP categories (field 10142) and templates of the two record kinds.
const (
	TemplateTrade = sse.TradeTemplateID
	TemplateOrder = sse.OrderTemplateID
	CategoryTrade = sse.CategoryTrade
	CategoryOrder = sse.CategoryOrder
)

// securities are real SSE main-board and STAR codes with a plausible price
// in 1/1000 yuan.
var securities = []struct {
	id    string
	price int64
}{
	{"600000", 7_850}, {"600036", 33_420}, {"600519", 1_688_000},
	{"601318", 48_960}, {"600900", 26_310}, {"601988", 4_370},
	{"688981", 87_150}, {"600030", 21_540},
}

// market produces the records of one channel: an order book per security
// reduced to what the records need (live order numbers, a mid price that
// walks in ticks), and the channel's sequences.
type market struct {
	rng        *rand.Rand
	channel    uint32
	mid        []int64
	live       [][]liveOrder // per security, resting orders that may be cancelled or hit
	orderIndex uint32
	tradeIndex uint32
	bizIndex   uint64
	orderNO    uint64
	clock      int64 // ns since 09:30:00.00 of the trading day
}

type liveOrder struct {
	no    uint64
	price int64
	qty   int64
	buy   bool
}

const tick = 10 // 0.01 yuan in 1/1000 yuan

func newMarket(rng *rand.Rand, channel uint32) *market {
	m := &market{rng: rng, channel: channel, orderNO: uint64(channel) * 1_000_000}
	m.mid = make([]int64, len(securities))
	m.live = make([][]liveOrder, len(securities))
	for i, s := range securities {
		m.mid[i] = s.price
	}
	return m
}

// advance moves the market clock by an exponential inter-arrival time with
// the given mean.
func (m *market) advance(meanNs float64) {
	m.clock += int64(m.rng.ExpFloat64()*meanNs) + 1
}

// hhmmssss returns the clock as the exchange's HHMMSSss time of day,
// counting from 09:30:00.00.
func (m *market) hhmmssss() uint32 {
	cs := 9*360_000 + 30*6_000 + m.clock/10_000_000 // hundredths since midnight
	h, mi, s, c := cs/360_000, cs/6_000%60, cs/100%60, cs%100
	return uint32(h*1_000_000 + mi*10_000 + s*100 + c)
}

func (m *market) pickSecurity() int {
	// A few names carry most of the flow, as on a real channel.
	i := int(math.Abs(m.rng.NormFloat64()) * 2.5)
	return i % len(securities)
}

func (m *market) lots() int64 {
	// Round lots of 100 shares, occasionally large, 3 implied decimals.
	n := int64(1 + m.rng.IntN(20))
	if m.rng.IntN(10) == 0 {
		n *= int64(10 + m.rng.IntN(40))
	}
	return n * 100 * 1000
}

func (m *market) nextOrder() sse.Order {
	s := m.pickSecurity()
	m.orderIndex++
	m.bizIndex++
	if m.rng.IntN(100) < 3 {
		m.mid[s] += int64(m.rng.IntN(3)-1) * tick
	}
	o := sse.Order{
		OrderIndex:   m.orderIndex,
		OrderChannel: m.channel, HasOrderChannel: true,
		SecurityID: sse.SecurityID(securities[s].id),
		OrderTime:  sse.Time(m.hhmmssss()), HasOrderTime: true,
		HasOrderPrice: true, HasBalance: true,
		BizIndex: m.bizIndex,
	}
	if book := m.live[s]; len(book) > 0 && m.rng.IntN(5) == 0 {
		k := m.rng.IntN(len(book))
		lo := book[k]
		m.live[s] = append(book[:k], book[k+1:]...)
		o.OrderType, o.OrderNO, o.OrderPrice, o.Balance = 'D', lo.no, sse.Price(lo.price), sse.Qty(lo.qty)
		o.OrderBSFlag = bsFlag(lo.buy)
		return o
	}
	buy := m.rng.IntN(2) == 0
	off := int64(1+m.rng.IntN(5)) * tick
	price := m.mid[s] - off
	if !buy {
		price = m.mid[s] + off
	}
	m.orderNO++
	lo := liveOrder{no: m.orderNO, price: price, qty: m.lots(), buy: buy}
	if len(m.live[s]) < 64 {
		m.live[s] = append(m.live[s], lo)
	}
	o.OrderType, o.OrderNO, o.OrderPrice, o.Balance = 'A', lo.no, sse.Price(lo.price), sse.Qty(lo.qty)
	o.OrderBSFlag = bsFlag(buy)
	return o
}

func (m *market) nextTrade() sse.Trade {
	s := m.pickSecurity()
	m.tradeIndex++
	m.bizIndex++
	// An aggressive order lifts or hits a resting one.
	buyNo, sellNo := m.orderNO+1, m.orderNO+2
	flag := byte('N')
	switch m.rng.IntN(10) {
	case 0, 1, 2, 3, 4:
		flag = 'B'
	case 5, 6, 7, 8:
		flag = 'S'
	}
	m.orderNO += 2
	qty := m.lots()
	price := m.mid[s] + int64(m.rng.IntN(3)-1)*tick
	return sse.Trade{
		TradeIndex:   m.tradeIndex,
		TradeChannel: m.channel, HasTradeChannel: true,
		SecurityID: sse.SecurityID(securities[s].id),
		TradeTime:  sse.Time(m.hhmmssss()), HasTradeTime: true,
		TradePrice: sse.Price(price), HasTradePrice: true,
		TradeQty: sse.Qty(qty), HasTradeQty: true,
		// price (3 decimals) x qty (3 decimals) has 6; money keeps 5.
		TradeMoney: sse.Money(price * qty / 10), HasTradeMoney: true,
		TradeBuyNo: buyNo, HasTradeBuyNo: true,
		TradeSellNo: sellNo, HasTradeSellNo: true,
		TradeBSFlag: flag, HasTradeBSFlag: true,
		BizIndex: m.bizIndex,
	}
}

func bsFlag(buy bool) byte {
	if buy {
		return 'B'
	}
	return 'S'
}
