package sse

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/internal/stopbit"
)

// TestInlineIntegers checks the generated 8-byte fast paths (uvarint8,
// signed, ascii8) against package fast's careful primitives on every
// encoding length, overlong forms included, at every alignment.
func TestInlineIntegers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []uint64{0, 1, 63, 64, 127, 128, 1<<14 - 1, 1 << 14, 1<<56 - 1, 1 << 56, math.MaxUint64}
	for range 2000 {
		vals = append(vals, r.Uint64()>>r.IntN(64))
	}
	for _, u := range vals {
		for _, wire := range [][]byte{
			fast.AppendUint64(nil, u),
			fast.AppendInt64(nil, int64(u)),
			append([]byte{0x00}, fast.AppendUint64(nil, u)...), // overlong
			append([]byte{0x7f}, fast.AppendInt64(nil, -1)...), // overlong negative
		} {
			for pad := range 9 {
				b := append(append(make([]byte, pad), wire...), 0, 0, 0, 0, 0, 0, 0, 0)
				wantU, nextU, errU := fast.ReadUint64(b, pad)
				x, n := uvarint8(b, pad)
				if n <= 8 && (errU != nil || x != wantU || pad+n != nextU) {
					t.Fatalf("uvarint8(% x) = %d, %d; fast.ReadUint64: %d, %d, %v", wire, x, n, wantU, nextU-pad, errU)
				}
				if n > 8 && len(wire) <= 8 {
					t.Fatalf("uvarint8(% x) took the careful path", wire)
				}
				wantI, nextI, errI := fast.ReadInt64(b, pad)
				y, n := signed(uvarint8(b, pad))
				if n <= 8 && (errI != nil || y != wantI || pad+n != nextI) {
					t.Fatalf("signed(uvarint8(% x)) = %d, %d; fast.ReadInt64: %d, %d, %v", wire, y, n, wantI, nextI-pad, errI)
				}
			}
		}
	}
	// Too short to load 8 bytes: the careful path decides.
	if _, n := uvarint8([]byte{0x81}, 0); n <= 8 {
		t.Fatal("uvarint8 read past a short buffer")
	}
	// No stop bit in 8 bytes.
	if _, n := uvarint8(make([]byte, 16), 0); n <= 8 {
		t.Fatal("uvarint8 accepted an integer longer than 8 bytes")
	}
}

func TestInlineASCII(t *testing.T) {
	for _, s := range []string{"A", "60", "600000", "ABCDEFGH", "ABCDEFGHI"} {
		wire := fast.AppendASCII(nil, []byte(s))
		b := append(wire, make([]byte, 8)...)
		w, n := ascii8(b, 0)
		if len(s) > 8 {
			if n <= 8 {
				t.Fatalf("ascii8(%q) found a stop bit", s)
			}
			continue
		}
		var got [8]byte
		for i := range got {
			got[i] = byte(w >> (8 * i))
		}
		if n != len(s) || string(got[:n]) != s || w>>(8*uint(n)&63) != 0 && n < 8 {
			t.Fatalf("ascii8(%q) = %x, %d", s, w, n)
		}
	}
}

// TestDecodeRecords checks DecodeRecords against DecodeRecord called record
// by record: the same records, the same error and offset when a payload is
// cut or corrupted, and no allocation.
func TestDecodeRecords(t *testing.T) {
	mk := newMarket(11)
	r := rand.New(rand.NewPCG(3, 4))
	var enc Encoder
	var payload []byte
	for i := range 40 {
		var err error
		if i%3 == 0 {
			o := mk.order()
			payload, err = enc.AppendOrder(payload, &o)
		} else {
			tr := mk.trade()
			payload, err = enc.AppendTrade(payload, &tr)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	one := func(p []byte) (*collect, int, error) {
		var d Decoder
		c := &collect{}
		off := 0
		for off < len(p) {
			next, err := d.DecodeRecord(p, off, c)
			if err != nil {
				return c, next, err
			}
			off = next
		}
		return c, off, nil
	}
	all := func(p []byte) (*collect, int, error) {
		var d Decoder
		c := &collect{}
		off, err := d.DecodeRecords(p, c)
		return c, off, err
	}
	check := func(p []byte) {
		c1, off1, err1 := one(p)
		c2, off2, err2 := all(p)
		if fmt.Sprint(c1.all) != fmt.Sprint(c2.all) || off1 != off2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("payload % x:\nDecodeRecord:  %d records, %d, %v\nDecodeRecords: %d records, %d, %v",
				p, len(c1.all), off1, err1, len(c2.all), off2, err2)
		}
	}
	check(payload)
	if c, _, err := all(payload); err != nil || len(c.all) != 40 {
		t.Fatalf("%d records, %v", len(c.all), err)
	}
	check(nil)
	for range 300 {
		p := append([]byte(nil), payload[:r.IntN(len(payload)+1)]...)
		if len(p) > 0 && r.IntN(2) == 0 {
			p[r.IntN(len(p))] ^= byte(1 << r.IntN(8))
		}
		check(p)
	}

	var d Decoder
	h := nopHandler{}
	if a := testing.AllocsPerRun(100, func() {
		d.Reset()
		if _, err := d.DecodeRecords(payload, h); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("DecodeRecords: %v allocations per payload", a)
	}
}

// TestWindowPath checks that realistic records take the window path (all
// but a payload's first record, whose values are all sent, and records
// that would need more than the window) and come out as package fast's
// generic decoder decodes them (decodeBoth; TestTypedMatchesGeneric and
// FuzzDecode compare both paths on edge values and damaged input).
func TestWindowPath(t *testing.T) {
	mk := newMarket(21)
	var enc Encoder
	var payload []byte
	var starts []int
	for i := range 200 {
		starts = append(starts, len(payload))
		var err error
		if i%2 == 0 {
			tr := mk.trade()
			payload, err = enc.AppendTrade(payload, &tr)
		} else {
			o := mk.order()
			payload, err = enc.AppendOrder(payload, &o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var dec Decoder
	dec.tail.start = -1
	recs := &collect{}
	window := 0
	for i, off := range starts {
		if n := dec.decodeWindow(payload, off, recs, false) - off; n > 0 {
			window++
			if i+1 < len(starts) && off+n != starts[i+1] {
				t.Fatalf("record %d: window path length %d, want %d", i, n, starts[i+1]-off)
			}
		} else if _, err := dec.DecodeRecord(payload, off, recs); err != nil {
			t.Fatal(err)
		}
	}
	if len(recs.all) != len(starts) {
		t.Fatalf("%d records decoded, want %d", len(recs.all), len(starts))
	}
	decodeBoth(t, newGeneric(t), payload)
	if window < len(starts)-2 {
		t.Fatalf("window path took %d of %d realistic records", window, len(starts))
	}
}

// TestTokenPath checks that the token path decodes a payload of realistic
// records from end to end (the first record's full values included, the
// batch scanned again when full), that it leaves a record with a value over
// 8 bytes to the careful path and goes on after it, and that DecodeRecords
// agrees with DecodeRecord and with package fast's generic decoder
// (decodeBoth; FuzzDecode does the same on damaged input).
func TestTokenPath(t *testing.T) {
	if !stopbit.Accelerated {
		t.Log("no stopbit kernel: DecodeRecords takes the window path here; decodeTokens is tested directly")
	}
	mk := newMarket(22)
	var enc Encoder
	var payload []byte
	var starts []int
	const n, long = 200, 120
	for i := range n {
		starts = append(starts, len(payload))
		var err error
		if i%2 == 0 {
			tr := mk.trade()
			if i == long {
				tr.BizIndex = 1 << 60 // 9 bytes on the wire
			}
			payload, err = enc.AppendTrade(payload, &tr)
		} else {
			o := mk.order()
			payload, err = enc.AppendOrder(payload, &o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var dec Decoder
	dec.tokStart = -1
	recs := &collect{}
	if off := dec.decodeTokens(payload, 0, recs); off != starts[long] {
		t.Fatalf("token path stopped at %d, want %d (the record with a 9-byte value)", off, starts[long])
	}
	if _, err := dec.DecodeRecord(payload, starts[long], recs); err != nil {
		t.Fatal(err)
	}
	if off := dec.decodeTokens(payload, starts[long+1], recs); off != len(payload) {
		t.Fatalf("token path stopped at %d, want %d", off, len(payload))
	}
	if len(recs.all) != n {
		t.Fatalf("%d records decoded, want %d", len(recs.all), n)
	}
	decodeBoth(t, newGeneric(t), payload)
}

// TestMaxPMapBytes checks the presence-map bound on DecodeRecords: realistic
// trades have 2-byte presence maps, so a bound of 1 stops at the first
// record with a limit error (the token path, which has no such check, is
// not used under a bound below 8), and larger bounds decode them all.
func TestMaxPMapBytes(t *testing.T) {
	mk := newMarket(31)
	var enc Encoder
	var payload []byte
	for range 5 {
		tr := mk.trade()
		var err error
		if payload, err = enc.AppendTrade(payload, &tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, bound := range []int{1, 2, 7, 8, 9, 0} {
		d := Decoder{MaxPMapBytes: bound}
		c := &collect{}
		n, err := d.DecodeRecords(payload, c)
		if bound == 1 {
			if !errors.Is(err, fast.ErrLimit) || n != 0 || len(c.all) != 0 {
				t.Fatalf("MaxPMapBytes 1: %d, %v, %d records; want 0, a limit error, none", n, err, len(c.all))
			}
			continue
		}
		if err != nil || n != len(payload) || len(c.all) != 5 {
			t.Fatalf("MaxPMapBytes %d: %d, %v, %d records; want %d, nil, 5", bound, n, err, len(c.all), len(payload))
		}
	}
}

// TestTokenPathTextAtEnd checks the token path's string loads where a
// record ends in its SecurityID: trades that change only their SecurityID
// put it last on the wire, so the last record's string lies in the
// payload's last bytes, where no 8-byte load fits and the token's packed
// value is unpacked instead. Every prefix ending at a record is decoded by
// the token path and must give the records DecodeRecord gives.
func TestTokenPathTextAtEnd(t *testing.T) {
	ids := []string{"600000", "6", "60", "601", "6012", "60123", "688981"}
	var enc Encoder
	var payload []byte
	var ends []int
	tr := Trade{TradeIndex: 7, TradeChannel: 1, HasTradeChannel: true, TradeTime: 93000000, HasTradeTime: true, BizIndex: 100}
	for i := range 3 * len(ids) {
		if i > 0 {
			tr.TradeIndex++
			tr.BizIndex++
		}
		tr.SecurityID = [6]byte{}
		copy(tr.SecurityID[:], ids[i%len(ids)])
		var err error
		if payload, err = enc.AppendTrade(payload, &tr); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, len(payload))
	}
	if last := ends[len(ends)-1] - ends[len(ends)-2]; last > 8 {
		t.Fatalf("the last record takes %d bytes: its SecurityID is not in the payload's last 8", last)
	}
	for i, end := range ends {
		var dec, careful Decoder
		dec.tokStart = -1
		got, want := &collect{}, &collect{}
		if off := dec.decodeTokens(payload[:end], 0, got); off != end {
			t.Fatalf("prefix of %d records: token path stopped at %d, want %d", i+1, off, end)
		}
		for off := 0; off < end; {
			var err error
			if off, err = careful.DecodeRecord(payload[:end], off, want); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got.all, want.all) {
			t.Fatalf("prefix of %d records: token path\n%q\nDecodeRecord\n%q", i+1, got.all, want.all)
		}
	}
}
