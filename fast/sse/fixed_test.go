package sse

import (
	"math"
	"testing"
)

func TestFixedPoint(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Price(0).String(), "0.000"},
		{Price(1).String(), "0.001"},
		{Price(-5).String(), "-0.005"},
		{Price(12345).String(), "12.345"},
		{Qty(100000).String(), "100.000"},
		{Money(123456789).String(), "1234.56789"},
		{Money(math.MinInt64).String(), "-92233720368547.75808"},
		{Time(0).String(), "00:00:00.00"},
		{Time(9300012).String(), "09:30:00.12"},
		{Time(99999999).String(), "99999999"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if h := Time(9300012).Hundredths(); h != (9*3600+30*60)*100+12 {
		t.Errorf("Hundredths = %d", h)
	}
	if f := Price(12345).Float64(); f != 12.345 {
		t.Errorf("Float64 = %v", f)
	}
	buf := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(100, func() { Price(12345).AppendTo(buf) }); a != 0 {
		t.Errorf("AppendTo allocates %v", a)
	}
}
