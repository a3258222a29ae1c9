package hwoffload_test

import (
	"testing"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/hwoffload"
)

func TestSlotRoundTrip(t *testing.T) {
	s := hwoffload.Slot(make([]byte, hwoffload.SlotBytes))
	for i := range s {
		s[i] = 0xAA // PutHeader must clear it
	}
	tr := sse.Trade{
		DataStatus: -3, HasDataStatus: true, TradeIndex: 7, TradeChannel: 2, HasTradeChannel: true,
		SecurityID: [6]byte{'6', '0', '0', '0', '0', '0'}, TradeTime: 9300012, HasTradeTime: true,
		TradePrice: -12345, HasTradePrice: true, TradeQty: 100000, HasTradeQty: true,
		TradeMoney: 1234500000, HasTradeMoney: true, TradeBuyNo: 11, HasTradeBuyNo: true,
		TradeSellNo: 12, HasTradeSellNo: true, TradeBSFlag: 'B', HasTradeBSFlag: true, BizIndex: 1 << 40,
	}
	s.Clear()
	s.PutHeader(hwoffload.KindTrade, 3, 4, 5, 6)
	s.PutTrade(&tr)
	if p := s.Present(); p != 0x1FF {
		t.Errorf("present = %#x, want 0x1ff", p)
	}
	var got sse.Trade
	if !s.Trade(&got) || got != tr {
		t.Errorf("trade:\n got %+v\nwant %+v", got, tr)
	}
	if s.Flow() != 3 || s.Seq() != 4 || s.RxCycles() != 5 || s.OutCycles() != 6 {
		t.Error("header")
	}
	var o sse.Order
	if s.Order(&o) {
		t.Error("a trade slot decoded as an order")
	}

	// Absent fields are zero in the slot and absent after decoding.
	tr2 := sse.Trade{TradeIndex: 1, TradePrice: 5, BizIndex: 2}
	s.Clear()
	s.PutHeader(hwoffload.KindTrade, 0, 0, 0, 0)
	s.PutTrade(&tr2)
	want := sse.Trade{TradeIndex: 1, BizIndex: 2}
	if !s.Trade(&got) || got != want {
		t.Errorf("sparse trade: got %+v", got)
	}
	if s[hwoffload.TradePrice] != 0 {
		t.Error("an absent field is not zero in the slot")
	}

	ord := sse.Order{
		OrderIndex: 9, OrderChannel: 1, HasOrderChannel: true, SecurityID: [6]byte{'6', '8', '8', '9', '8', '1'},
		OrderTime: 9300100, HasOrderTime: true, OrderType: 'A', OrderNO: 77, OrderPrice: 4294967, HasOrderPrice: true,
		Balance: 500000, HasBalance: true, OrderBSFlag: 'S', BizIndex: 99,
	}
	s.Clear()
	s.PutHeader(hwoffload.KindOrder, 1, 2, 3, 4)
	s.PutOrder(&ord)
	if p := s.Present(); p != 0xF {
		t.Errorf("order present = %#x", p)
	}
	if !s.Order(&o) || o != ord {
		t.Errorf("order:\n got %+v\nwant %+v", o, ord)
	}

	s.Clear()
	s.PutHeader(hwoffload.KindFlowEnd, 0, 0, 0, 0)
	s.PutFlow(0x0a1f0001, 0x0a20000a, 9129, 50000, hwoffload.EndInput)
	if a, b, c, d := s.FlowAddrs(); a != 0x0a1f0001 || b != 0x0a20000a || c != 9129 || d != 50000 || s.EndReason() != 4 {
		t.Error("flow")
	}
	s.Clear()
	s.PutHeader(hwoffload.KindDecodeError, 0, 0, 0, 0)
	s.PutDecodeError(^uint64(0), "D2")
	if off, code := s.DecodeError(); off != ^uint64(0) || string(code[:2]) != "D2" || code[2] != 0 {
		t.Error("decode error")
	}
}
