package sse

import "strconv"

// String returns the trade on one line, absent optional fields left out,
// e.g. "trade 600000 idx=1 ch=1 09:30:00.12 12.345x100.000=1234.50000 buy=11 sell=12 B biz=1".
func (t *Trade) String() string { return string(t.AppendText(nil)) }

// AppendText appends the String form of t to dst.
func (t *Trade) AppendText(dst []byte) []byte {
	dst = append(dst, "trade "...)
	dst = appendSecurity(dst, &t.SecurityID)
	dst = append(dst, " idx="...)
	dst = strconv.AppendUint(dst, uint64(t.TradeIndex), 10)
	if t.HasTradeChannel {
		dst = append(dst, " ch="...)
		dst = strconv.AppendUint(dst, uint64(t.TradeChannel), 10)
	}
	if t.HasTradeTime {
		dst = append(dst, ' ')
		dst = t.TradeTime.AppendTo(dst)
	}
	if t.HasTradePrice {
		dst = append(dst, ' ')
		dst = t.TradePrice.AppendTo(dst)
	}
	if t.HasTradeQty {
		dst = append(dst, 'x')
		dst = t.TradeQty.AppendTo(dst)
	}
	if t.HasTradeMoney {
		dst = append(dst, '=')
		dst = t.TradeMoney.AppendTo(dst)
	}
	if t.HasTradeBuyNo {
		dst = append(dst, " buy="...)
		dst = strconv.AppendUint(dst, t.TradeBuyNo, 10)
	}
	if t.HasTradeSellNo {
		dst = append(dst, " sell="...)
		dst = strconv.AppendUint(dst, t.TradeSellNo, 10)
	}
	if t.HasTradeBSFlag && t.TradeBSFlag != 0 {
		dst = append(dst, ' ', t.TradeBSFlag)
	}
	if t.HasDataStatus {
		dst = append(dst, " status="...)
		dst = strconv.AppendInt(dst, int64(t.DataStatus), 10)
	}
	dst = append(dst, " biz="...)
	return strconv.AppendUint(dst, t.BizIndex, 10)
}

// String returns the order on one line, absent optional fields left out,
// e.g. "order 600000 idx=1 ch=1 09:30:00.12 A B 12.345x100.000 no=7 biz=2".
func (o *Order) String() string { return string(o.AppendText(nil)) }

// AppendText appends the String form of o to dst.
func (o *Order) AppendText(dst []byte) []byte {
	dst = append(dst, "order "...)
	dst = appendSecurity(dst, &o.SecurityID)
	dst = append(dst, " idx="...)
	dst = strconv.AppendUint(dst, uint64(o.OrderIndex), 10)
	if o.HasOrderChannel {
		dst = append(dst, " ch="...)
		dst = strconv.AppendUint(dst, uint64(o.OrderChannel), 10)
	}
	if o.HasOrderTime {
		dst = append(dst, ' ')
		dst = o.OrderTime.AppendTo(dst)
	}
	dst = appendFlag(dst, o.OrderType)
	dst = appendFlag(dst, o.OrderBSFlag)
	if o.HasOrderPrice {
		dst = append(dst, ' ')
		dst = o.OrderPrice.AppendTo(dst)
	}
	if o.HasBalance {
		dst = append(dst, 'x')
		dst = o.Balance.AppendTo(dst)
	}
	dst = append(dst, " no="...)
	dst = strconv.AppendUint(dst, o.OrderNO, 10)
	dst = append(dst, " biz="...)
	return strconv.AppendUint(dst, o.BizIndex, 10)
}

func appendFlag(dst []byte, c byte) []byte {
	if c == 0 {
		return append(dst, " -"...)
	}
	return append(dst, ' ', c)
}

func appendSecurity(dst []byte, id *[6]byte) []byte {
	return append(dst, trimNUL(id[:])...)
}

// Security returns the SecurityID as a string, NUL padding removed.
func (t *Trade) Security() string { return string(trimNUL(t.SecurityID[:])) }

// Security returns the SecurityID as a string, NUL padding removed.
func (o *Order) Security() string { return string(trimNUL(o.SecurityID[:])) }

// SecurityID returns s as a SecurityID array, truncated to 6 bytes.
func SecurityID(s string) [6]byte {
	var id [6]byte
	copy(id[:], s)
	return id
}
