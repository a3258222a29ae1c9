package sse

import "strconv"

// Price is a price with 3 implied decimals: Price(12345) is 12.345 yuan.
type Price int64

// Qty is a quantity (shares, or the remaining Balance of an order) with 3
// implied decimals: Qty(100000) is 100 shares.
type Qty int64

// Money is an amount of money with 5 implied decimals: Money(123456789) is
// 1234.56789 yuan.
type Money int64

// Time is a time of day as the exchange sends it, HHMMSSss (hundredths of a
// second): Time(9300012) is 09:30:00.12.
type Time uint32

// String returns the price with its 3 decimals, e.g. "12.345".
func (p Price) String() string { return string(p.AppendTo(nil)) }

// AppendTo appends the String form of p to dst.
func (p Price) AppendTo(dst []byte) []byte { return appendFixed(dst, int64(p), 3) }

// Float64 returns the price in yuan.
func (p Price) Float64() float64 { return float64(p) / 1e3 }

// String returns the quantity with its 3 decimals, e.g. "100.000".
func (q Qty) String() string { return string(q.AppendTo(nil)) }

// AppendTo appends the String form of q to dst.
func (q Qty) AppendTo(dst []byte) []byte { return appendFixed(dst, int64(q), 3) }

// Float64 returns the quantity.
func (q Qty) Float64() float64 { return float64(q) / 1e3 }

// String returns the amount with its 5 decimals, e.g. "1234.56789".
func (m Money) String() string { return string(m.AppendTo(nil)) }

// AppendTo appends the String form of m to dst.
func (m Money) AppendTo(dst []byte) []byte { return appendFixed(dst, int64(m), 5) }

// Float64 returns the amount in yuan.
func (m Money) Float64() float64 { return float64(m) / 1e5 }

// String returns the time as "HH:MM:SS.ss", e.g. "09:30:00.12".
func (t Time) String() string { return string(t.AppendTo(nil)) }

// AppendTo appends the String form of t to dst. Values that are not a valid
// HHMMSSss time are printed as they are, in decimal.
func (t Time) AppendTo(dst []byte) []byte {
	if t > 23595999 {
		return strconv.AppendUint(dst, uint64(t), 10)
	}
	v := uint32(t)
	return append(dst,
		byte('0'+v/10000000), byte('0'+v/1000000%10), ':',
		byte('0'+v/100000%10), byte('0'+v/10000%10), ':',
		byte('0'+v/1000%10), byte('0'+v/100%10), '.',
		byte('0'+v/10%10), byte('0'+v%10))
}

// Hundredths returns the time as hundredths of a second since midnight.
func (t Time) Hundredths() uint32 {
	v := uint32(t)
	return v/1000000*360000 + v/10000%100*6000 + v/100%100*100 + v%100
}

// appendFixed appends v / 10^decimals with exactly that many decimals.
func appendFixed(dst []byte, v int64, decimals int) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = -u
	}
	var pow uint64 = 1
	for range decimals {
		pow *= 10
	}
	dst = strconv.AppendUint(dst, u/pow, 10)
	dst = append(dst, '.')
	frac := u % pow
	for pow /= 10; pow > 0; pow /= 10 {
		dst = append(dst, byte('0'+frac/pow%10))
	}
	return dst
}
