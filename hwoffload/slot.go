package hwoffload

import (
	"encoding/binary"

	"github.com/tickwire/tickwire/fast/sse"
)

// Record kinds (the slot's kind field).
const (
	KindTCPGap      = 1    // ring 2: stream bytes never captured
	KindSeqGap      = 2    // ring 2: a STEP sequence gap
	KindDecodeError = 3    // ring 2: a STEP or FAST decoding error
	KindFlowStart   = 4    // ring 2: written before a flow direction's first record
	KindFlowEnd     = 5    // ring 2
	KindTrade       = 3201 // ring 0: sse.Trade
	KindOrder       = 5801 // ring 1: sse.Order
)

// Flow end reasons (the flow end record's reason field).
const (
	EndFIN     = 1
	EndRST     = 2
	EndEvicted = 3
	EndInput   = 4 // end of input
	EndRestart = 5 // a new SYN restarted the flow direction
)

// Offsets in a slot. Every record starts with the header; the body's
// offsets depend on the kind.
const (
	SlotKind      = 0  // u16
	SlotPresent   = 2  // u16: a bit per optional field
	SlotFlow      = 4  // u32: the engine's flow-direction index
	SlotSeq       = 8  // u64: the ring's record number, dropped records included
	SlotRxCycles  = 16 // u64: CYCLES when the record's last frame arrived
	SlotOutCycles = 24 // u64: CYCLES when the record was written
	SlotBody      = 32

	TradeIndex    = 32 // u32
	TradeChannel  = 36 // u32
	TradeStatus   = 40 // i32 DataStatus
	TradeTime     = 44 // u32
	TradeSecurity = 48 // [6]u8 SecurityID
	TradeBSFlag   = 54 // u8
	TradePrice    = 56 // i32
	TradeQty      = 64 // i64
	TradeMoney    = 72 // i64
	TradeBuyNo    = 80 // u64
	TradeSellNo   = 88 // u64
	TradeBizIndex = 96 // u64

	OrderIndex    = 32 // u32
	OrderChannel  = 36 // u32
	OrderTime     = 40 // u32
	OrderPrice    = 44 // u32
	OrderSecurity = 48 // [6]u8 SecurityID
	OrderType     = 54 // u8
	OrderBSFlag   = 55 // u8
	OrderNO       = 56 // u64
	OrderBalance  = 64 // u64
	OrderBizIndex = 72 // u64

	GapOffset = 32 // u64: TCP gap stream offset
	GapLength = 40 // u64

	SeqGapCategory = 32 // u32
	SeqGapExpected = 40 // u64
	SeqGapReceived = 48 // u64

	DecodeErrorOffset = 32 // u64: stream offset, ^0 when unknown
	DecodeErrorCode   = 40 // [8]u8: e.g. "D2", NUL padded

	FlowSrcIP   = 32 // u32 IPv4
	FlowDstIP   = 36 // u32
	FlowSrcPort = 40 // u16
	FlowDstPort = 42 // u16
	FlowReason  = 44 // u8, flow end only
)

// Present bits of a trade record.
const (
	TradeHasDataStatus = 1 << iota
	TradeHasChannel
	TradeHasTime
	TradeHasPrice
	TradeHasQty
	TradeHasMoney
	TradeHasBuyNo
	TradeHasSellNo
	TradeHasBSFlag
)

// Present bits of an order record.
const (
	OrderHasChannel = 1 << iota
	OrderHasTime
	OrderHasPrice
	OrderHasBalance
)

// Slot is one record slot of a result ring, SlotBytes long. Its accessors
// do not check the length: make a Slot only from a SlotBytes slice (a
// Ring's Read does). A Slot read from a ring aliases the ring's memory and
// is valid until the next call to that Ring's Read or Wait.
type Slot []byte

var le = binary.LittleEndian

// Kind returns the record kind.
func (s Slot) Kind() uint16 { return le.Uint16(s[SlotKind:]) }

// Present returns the present bits.
func (s Slot) Present() uint16 { return le.Uint16(s[SlotPresent:]) }

// Flow returns the engine's flow-direction index.
func (s Slot) Flow() uint32 { return le.Uint32(s[SlotFlow:]) }

// Seq returns the ring's record number.
func (s Slot) Seq() uint64 { return le.Uint64(s[SlotSeq:]) }

// RxCycles returns CYCLES when the record's last frame arrived.
func (s Slot) RxCycles() uint64 { return le.Uint64(s[SlotRxCycles:]) }

// OutCycles returns CYCLES when the record was written.
func (s Slot) OutCycles() uint64 { return le.Uint64(s[SlotOutCycles:]) }

// Clear zeroes the slot: write a record as Clear, PutHeader, then the
// body's Put method.
func (s Slot) Clear() { clear(s[:SlotBytes]) }

// PutHeader writes the header but the present bits, which PutTrade and
// PutOrder write.
func (s Slot) PutHeader(kind uint16, flow uint32, seq, rx, out uint64) {
	le.PutUint16(s[SlotKind:], kind)
	le.PutUint32(s[SlotFlow:], flow)
	le.PutUint64(s[SlotSeq:], seq)
	le.PutUint64(s[SlotRxCycles:], rx)
	le.PutUint64(s[SlotOutCycles:], out)
}

// PutTrade writes t's body and present bits into a cleared slot; absent
// fields stay zero.
func (s Slot) PutTrade(t *sse.Trade) {
	var p uint16
	le.PutUint32(s[TradeIndex:], t.TradeIndex)
	if t.HasTradeChannel {
		p |= TradeHasChannel
		le.PutUint32(s[TradeChannel:], t.TradeChannel)
	}
	if t.HasDataStatus {
		p |= TradeHasDataStatus
		le.PutUint32(s[TradeStatus:], uint32(t.DataStatus))
	}
	if t.HasTradeTime {
		p |= TradeHasTime
		le.PutUint32(s[TradeTime:], uint32(t.TradeTime))
	}
	copy(s[TradeSecurity:TradeSecurity+6], t.SecurityID[:])
	if t.HasTradeBSFlag {
		p |= TradeHasBSFlag
		s[TradeBSFlag] = t.TradeBSFlag
	}
	if t.HasTradePrice {
		p |= TradeHasPrice
		le.PutUint32(s[TradePrice:], uint32(int32(t.TradePrice)))
	}
	if t.HasTradeQty {
		p |= TradeHasQty
		le.PutUint64(s[TradeQty:], uint64(t.TradeQty))
	}
	if t.HasTradeMoney {
		p |= TradeHasMoney
		le.PutUint64(s[TradeMoney:], uint64(t.TradeMoney))
	}
	if t.HasTradeBuyNo {
		p |= TradeHasBuyNo
		le.PutUint64(s[TradeBuyNo:], t.TradeBuyNo)
	}
	if t.HasTradeSellNo {
		p |= TradeHasSellNo
		le.PutUint64(s[TradeSellNo:], t.TradeSellNo)
	}
	le.PutUint64(s[TradeBizIndex:], t.BizIndex)
	le.PutUint16(s[SlotPresent:], p)
}

// Trade decodes a trade record into t and reports whether the slot holds
// one (kind KindTrade); otherwise t is untouched.
func (s Slot) Trade(t *sse.Trade) bool {
	if s.Kind() != KindTrade {
		return false
	}
	p := s.Present()
	*t = sse.Trade{
		DataStatus:      int32(le.Uint32(s[TradeStatus:])),
		HasDataStatus:   p&TradeHasDataStatus != 0,
		TradeIndex:      le.Uint32(s[TradeIndex:]),
		TradeChannel:    le.Uint32(s[TradeChannel:]),
		HasTradeChannel: p&TradeHasChannel != 0,
		TradeTime:       sse.Time(le.Uint32(s[TradeTime:])),
		HasTradeTime:    p&TradeHasTime != 0,
		TradePrice:      sse.Price(int32(le.Uint32(s[TradePrice:]))),
		HasTradePrice:   p&TradeHasPrice != 0,
		TradeQty:        sse.Qty(le.Uint64(s[TradeQty:])),
		HasTradeQty:     p&TradeHasQty != 0,
		TradeMoney:      sse.Money(le.Uint64(s[TradeMoney:])),
		HasTradeMoney:   p&TradeHasMoney != 0,
		TradeBuyNo:      le.Uint64(s[TradeBuyNo:]),
		HasTradeBuyNo:   p&TradeHasBuyNo != 0,
		TradeSellNo:     le.Uint64(s[TradeSellNo:]),
		HasTradeSellNo:  p&TradeHasSellNo != 0,
		TradeBSFlag:     s[TradeBSFlag],
		HasTradeBSFlag:  p&TradeHasBSFlag != 0,
		BizIndex:        le.Uint64(s[TradeBizIndex:]),
	}
	copy(t.SecurityID[:], s[TradeSecurity:TradeSecurity+6])
	return true
}

// PutOrder writes o's body and present bits into a cleared slot.
func (s Slot) PutOrder(o *sse.Order) {
	var p uint16
	le.PutUint32(s[OrderIndex:], o.OrderIndex)
	if o.HasOrderChannel {
		p |= OrderHasChannel
		le.PutUint32(s[OrderChannel:], o.OrderChannel)
	}
	if o.HasOrderTime {
		p |= OrderHasTime
		le.PutUint32(s[OrderTime:], uint32(o.OrderTime))
	}
	if o.HasOrderPrice {
		p |= OrderHasPrice
		le.PutUint32(s[OrderPrice:], uint32(o.OrderPrice))
	}
	copy(s[OrderSecurity:OrderSecurity+6], o.SecurityID[:])
	s[OrderType] = o.OrderType
	s[OrderBSFlag] = o.OrderBSFlag
	le.PutUint64(s[OrderNO:], o.OrderNO)
	if o.HasBalance {
		p |= OrderHasBalance
		le.PutUint64(s[OrderBalance:], uint64(o.Balance))
	}
	le.PutUint64(s[OrderBizIndex:], o.BizIndex)
	le.PutUint16(s[SlotPresent:], p)
}

// Order decodes an order record into o and reports whether the slot holds
// one (kind KindOrder); otherwise o is untouched.
func (s Slot) Order(o *sse.Order) bool {
	if s.Kind() != KindOrder {
		return false
	}
	p := s.Present()
	*o = sse.Order{
		OrderIndex:      le.Uint32(s[OrderIndex:]),
		OrderChannel:    le.Uint32(s[OrderChannel:]),
		HasOrderChannel: p&OrderHasChannel != 0,
		OrderTime:       sse.Time(le.Uint32(s[OrderTime:])),
		HasOrderTime:    p&OrderHasTime != 0,
		OrderType:       s[OrderType],
		OrderNO:         le.Uint64(s[OrderNO:]),
		OrderPrice:      sse.Price(le.Uint32(s[OrderPrice:])),
		HasOrderPrice:   p&OrderHasPrice != 0,
		Balance:         sse.Qty(le.Uint64(s[OrderBalance:])),
		HasBalance:      p&OrderHasBalance != 0,
		OrderBSFlag:     s[OrderBSFlag],
		BizIndex:        le.Uint64(s[OrderBizIndex:]),
	}
	copy(o.SecurityID[:], s[OrderSecurity:OrderSecurity+6])
	return true
}

// PutTCPGap writes a TCP gap body.
func (s Slot) PutTCPGap(offset, length uint64) {
	le.PutUint64(s[GapOffset:], offset)
	le.PutUint64(s[GapLength:], length)
}

// TCPGap returns a TCP gap record's stream offset and length.
func (s Slot) TCPGap() (offset, length uint64) {
	return le.Uint64(s[GapOffset:]), le.Uint64(s[GapLength:])
}

// PutSeqGap writes a STEP sequence gap body.
func (s Slot) PutSeqGap(category uint32, expected, received uint64) {
	le.PutUint32(s[SeqGapCategory:], category)
	le.PutUint64(s[SeqGapExpected:], expected)
	le.PutUint64(s[SeqGapReceived:], received)
}

// SeqGap returns a STEP sequence gap record's fields.
func (s Slot) SeqGap() (category uint32, expected, received uint64) {
	return le.Uint32(s[SeqGapCategory:]), le.Uint64(s[SeqGapExpected:]), le.Uint64(s[SeqGapReceived:])
}

// PutDecodeError writes a decode error body; code is cut to 8 bytes.
func (s Slot) PutDecodeError(offset uint64, code string) {
	le.PutUint64(s[DecodeErrorOffset:], offset)
	copy(s[DecodeErrorCode:DecodeErrorCode+8], code)
}

// DecodeError returns a decode error record's stream offset (^0 when
// unknown) and code, NUL padding included.
func (s Slot) DecodeError() (offset uint64, code [8]byte) {
	copy(code[:], s[DecodeErrorCode:])
	return le.Uint64(s[DecodeErrorOffset:]), code
}

// PutFlow writes a flow start or end body; reason is 0 for a start.
func (s Slot) PutFlow(src, dst uint32, sport, dport uint16, reason uint8) {
	le.PutUint32(s[FlowSrcIP:], src)
	le.PutUint32(s[FlowDstIP:], dst)
	le.PutUint16(s[FlowSrcPort:], sport)
	le.PutUint16(s[FlowDstPort:], dport)
	s[FlowReason] = reason
}

// FlowAddrs returns a flow start or end record's direction: source and
// destination IPv4 (a<<24|b<<16|c<<8|d) and ports.
func (s Slot) FlowAddrs() (src, dst uint32, sport, dport uint16) {
	return le.Uint32(s[FlowSrcIP:]), le.Uint32(s[FlowDstIP:]), le.Uint16(s[FlowSrcPort:]), le.Uint16(s[FlowDstPort:])
}

// EndReason returns a flow end record's reason (EndFIN ...).
func (s Slot) EndReason() uint8 { return s[FlowReason] }
