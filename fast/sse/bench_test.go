package sse

import (
	"testing"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/internal/cputime"
)

// reportPerRecord adds wall and CPU nanoseconds per record.
func reportPerRecord(b *testing.B, records int, cpuStart int64) {
	n := float64(b.N) * float64(records)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
	if cpuStart > 0 {
		b.ReportMetric(float64(cputime.Process()-cpuStart)/n, "cpu-ns/record")
	}
}

// benchStream builds a STEP stream of msgs messages of perMsg realistic
// records of one template.
func benchStream(tb testing.TB, trades bool, msgs, perMsg int) (stream []byte, records int) {
	mk := newMarket(42)
	fe := NewFeedEncoder()
	fe.Header.SendingTime = []byte("20260105-09:30:00.000")
	ts := make([]Trade, perMsg)
	os := make([]Order, perMsg)
	for range msgs {
		var err error
		if trades {
			for i := range ts {
				ts[i] = mk.trade()
			}
			stream, err = fe.AppendTrades(stream, ts)
		} else {
			for i := range os {
				os[i] = mk.order()
			}
			stream, err = fe.AppendOrders(stream, os)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	return stream, msgs * perMsg
}

// benchFeed measures the whole typed path: STEP framing and checksum, a
// dictionary reset per STEP message, record decoding and the handler call,
// the stream fed in 1408-byte chunks (one TCP segment at the paper's MSS).
func benchFeed(b *testing.B, trades bool) {
	stream, records := benchStream(b, trades, 100, 20)
	fd := NewFeedDecoder(FeedConfig{}, nopHandler{})
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		for off := 0; off < len(stream); off += 1408 {
			if err := fd.Feed(stream[off:min(off+1408, len(stream))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerRecord(b, records, cpu)
}

func BenchmarkFeed3201(b *testing.B) { benchFeed(b, true) }
func BenchmarkFeed5801(b *testing.B) { benchFeed(b, false) }

// benchRecords measures record decoding alone on one STEP message's payload,
// record by record (DecodeRecord) or in one call (DecodeRecords, as
// FeedDecoder does).
func benchRecords(b *testing.B, trades, batch bool) {
	mk := newMarket(43)
	var enc Encoder
	var payload []byte
	const n = 20
	for range n {
		var err error
		if trades {
			t := mk.trade()
			payload, err = enc.AppendTrade(payload, &t)
		} else {
			o := mk.order()
			payload, err = enc.AppendOrder(payload, &o)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	var dec Decoder
	h := nopHandler{}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		dec.Reset()
		if batch {
			if _, err := dec.DecodeRecords(payload, h); err != nil {
				b.Fatal(err)
			}
			continue
		}
		for off := 0; off < len(payload); {
			next, err := dec.DecodeRecord(payload, off, h)
			if err != nil {
				b.Fatal(err)
			}
			off = next
		}
	}
	reportPerRecord(b, n, cpu)
}

func BenchmarkDecode3201(b *testing.B)        { benchRecords(b, true, false) }
func BenchmarkDecode5801(b *testing.B)        { benchRecords(b, false, false) }
func BenchmarkDecodeRecords3201(b *testing.B) { benchRecords(b, true, true) }
func BenchmarkDecodeRecords5801(b *testing.B) { benchRecords(b, false, true) }

// BenchmarkEncodeFeed measures FeedEncoder: 20 trades into one STEP message.
func BenchmarkEncodeFeed(b *testing.B) {
	mk := newMarket(44)
	ts := make([]Trade, 20)
	for i := range ts {
		ts[i] = mk.trade()
	}
	fe := NewFeedEncoder()
	buf := make([]byte, 0, 4096)
	buf, _ = fe.AppendTrades(buf, ts)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		var err error
		if buf, err = fe.AppendTrades(buf[:0], ts); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRecord(b, len(ts), cpu)
}

// BenchmarkGenericDecode3201 decodes the payload of BenchmarkDecode3201 with
// package fast's interpreting decoder, for comparison with the typed path.
func BenchmarkGenericDecode3201(b *testing.B) {
	mk := newMarket(43)
	var enc Encoder
	var payload []byte
	const n = 20
	for range n {
		t := mk.trade()
		payload, _ = enc.AppendTrade(payload, &t)
	}
	gd := newGeneric(b)
	var m fast.Message
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		gd.Reset()
		for off := 0; off < len(payload); {
			k, err := gd.Decode(payload[off:], &m)
			if err != nil {
				b.Fatal(err)
			}
			off += k
		}
	}
	reportPerRecord(b, n, cpu)
}
