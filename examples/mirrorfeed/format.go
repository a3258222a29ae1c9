package main

import (
	"strconv"

	"github.com/tickwire/tickwire/fast/sse"
)

// The JSON and CSV forms are written by hand, field by field, so printing a
// record costs no allocation. The JSON field names and integer values are
// those of internal/capgen's Trade and Order (the truth file's "fields").

func appendJSONHead(dst, kind, flow []byte, ts int64, template int) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, kind...)
	dst = append(dst, `","flow":"`...)
	dst = append(dst, flow...)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	dst = append(dst, `,"template":`...)
	dst = strconv.AppendInt(dst, int64(template), 10)
	return append(dst, `,"fields":{`...)
}

func appendUintField(dst []byte, name string, v uint64) []byte {
	dst = append(dst, name...)
	return strconv.AppendUint(dst, v, 10)
}

func appendIntField(dst []byte, name string, v int64) []byte {
	dst = append(dst, name...)
	return strconv.AppendInt(dst, v, 10)
}

// appendStringField writes an ASCII value from the feed (security codes,
// one-letter flags); anything outside printable ASCII is escaped.
func appendStringField(dst []byte, name string, v []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, '"')
	for _, c := range v {
		switch {
		case c == 0:
			// NUL padding of a fixed-length field is not part of the value.
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c >= 0x7f:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// byteValues[c] == c: a one-byte flag becomes a slice without allocating.
var byteValues = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	return t
}()

func flagBytes(b *byte, present bool) []byte {
	if !present || *b == 0 {
		return nil
	}
	return byteValues[*b : int(*b)+1]
}

func appendTradeJSON(dst, flow []byte, ts int64, t *sse.Trade) []byte {
	dst = appendJSONHead(dst, []byte("trade"), flow, ts, sse.TradeTemplateID)
	dst = appendUintField(dst, `"TradeIndex":`, uint64(t.TradeIndex))
	dst = appendUintField(dst, `,"TradeChannel":`, uint64(t.TradeChannel))
	dst = appendStringField(dst, `,"SecurityID":`, t.SecurityID[:])
	dst = appendUintField(dst, `,"TradeTime":`, uint64(t.TradeTime))
	dst = appendIntField(dst, `,"TradePrice":`, int64(t.TradePrice))
	dst = appendIntField(dst, `,"TradeQty":`, int64(t.TradeQty))
	dst = appendIntField(dst, `,"TradeMoney":`, int64(t.TradeMoney))
	dst = appendUintField(dst, `,"TradeBuyNo":`, t.TradeBuyNo)
	dst = appendUintField(dst, `,"TradeSellNo":`, t.TradeSellNo)
	dst = appendStringField(dst, `,"TradeBSFlag":`, flagBytes(&t.TradeBSFlag, t.HasTradeBSFlag))
	dst = appendUintField(dst, `,"BizIndex":`, t.BizIndex)
	return append(dst, "}}\n"...)
}

func appendOrderJSON(dst, flow []byte, ts int64, o *sse.Order) []byte {
	dst = appendJSONHead(dst, []byte("order"), flow, ts, sse.OrderTemplateID)
	dst = appendUintField(dst, `"OrderIndex":`, uint64(o.OrderIndex))
	dst = appendUintField(dst, `,"OrderChannel":`, uint64(o.OrderChannel))
	dst = appendStringField(dst, `,"SecurityID":`, o.SecurityID[:])
	dst = appendUintField(dst, `,"OrderTime":`, uint64(o.OrderTime))
	dst = appendStringField(dst, `,"OrderType":`, flagBytes(&o.OrderType, true))
	dst = appendUintField(dst, `,"OrderNO":`, o.OrderNO)
	dst = appendIntField(dst, `,"OrderPrice":`, int64(o.OrderPrice))
	dst = appendIntField(dst, `,"Balance":`, int64(o.Balance))
	dst = appendStringField(dst, `,"OrderBSFlag":`, flagBytes(&o.OrderBSFlag, true))
	dst = appendUintField(dst, `,"BizIndex":`, o.BizIndex)
	return append(dst, "}}\n"...)
}

// csvHeader names the columns shared by trades and orders: qty is TradeQty
// or Balance, no is OrderNO (empty for trades), buy_no and sell_no are
// empty for orders. Prices, quantities and money are decimal strings.
const csvHeader = "kind,flow,ts,channel,index,security,time,type,bs_flag,price,qty,money,no,buy_no,sell_no,biz_index\n"

func appendCSVText(dst, v []byte) []byte {
	for _, c := range v {
		if c > 0x20 && c < 0x7f && c != ',' && c != '"' {
			dst = append(dst, c)
		}
	}
	return dst
}

func appendTradeCSV(dst, flow []byte, ts int64, t *sse.Trade) []byte {
	dst = append(dst, "trade,"...)
	dst = append(dst, flow...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, ts, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, uint64(t.TradeChannel), 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, uint64(t.TradeIndex), 10)
	dst = append(dst, ',')
	dst = appendCSVText(dst, t.SecurityID[:])
	dst = append(dst, ',')
	dst = t.TradeTime.AppendTo(dst)
	dst = append(dst, ",,"...)
	dst = appendCSVText(dst, flagBytes(&t.TradeBSFlag, t.HasTradeBSFlag))
	dst = append(dst, ',')
	dst = t.TradePrice.AppendTo(dst)
	dst = append(dst, ',')
	dst = t.TradeQty.AppendTo(dst)
	dst = append(dst, ',')
	dst = t.TradeMoney.AppendTo(dst)
	dst = append(dst, ",,"...)
	dst = strconv.AppendUint(dst, t.TradeBuyNo, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, t.TradeSellNo, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, t.BizIndex, 10)
	return append(dst, '\n')
}

func appendOrderCSV(dst, flow []byte, ts int64, o *sse.Order) []byte {
	dst = append(dst, "order,"...)
	dst = append(dst, flow...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, ts, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, uint64(o.OrderChannel), 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, uint64(o.OrderIndex), 10)
	dst = append(dst, ',')
	dst = appendCSVText(dst, o.SecurityID[:])
	dst = append(dst, ',')
	dst = o.OrderTime.AppendTo(dst)
	dst = append(dst, ',')
	dst = appendCSVText(dst, flagBytes(&o.OrderType, true))
	dst = append(dst, ',')
	dst = appendCSVText(dst, flagBytes(&o.OrderBSFlag, true))
	dst = append(dst, ',')
	dst = o.OrderPrice.AppendTo(dst)
	dst = append(dst, ',')
	dst = o.Balance.AppendTo(dst)
	dst = append(dst, ",,"...)
	dst = strconv.AppendUint(dst, o.OrderNO, 10)
	dst = append(dst, ",,,"...)
	dst = strconv.AppendUint(dst, o.BizIndex, 10)
	return append(dst, '\n')
}
