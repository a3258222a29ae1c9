package main

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/pcap"
)

// holeStream is the stream every flow of holeCapture sends: 6 STEP messages
// of 3 trades, cut in three segments, the first ending and the third
// starting inside a message.
func holeStream(t testing.TB) (segs [3][]byte) {
	fe := sse.NewFeedEncoder()
	tr := sse.Trade{TradeIndex: 1, TradeChannel: 1, SecurityID: sse.SecurityID("600000"), TradeTime: 9300000,
		TradePrice: 10000, TradeQty: 100000, TradeMoney: 1000000}
	var stream []byte
	for range 6 {
		var err error
		if stream, err = fe.AppendTrades(stream, []sse.Trade{tr, tr, tr}); err != nil {
			t.Fatal(err)
		}
	}
	c1, c2 := len(stream)/3+7, 2*len(stream)/3-5
	return [3][]byte{stream[:c1], stream[c1:c2], stream[c2:]}
}

// writeHoleCapture writes to w an Ethernet pcap of n flow directions
// (servers 10.1.x.y:9000, one client each) that each hold a hole: every
// direction sends its first segment, then every direction its third; the
// second is lost. Frames are 100 ns apart, so no hole reaches the hole
// timeout before the capture ends.
func writeHoleCapture(t testing.TB, w io.Writer, n int) {
	segs := holeStream(t)
	pw, err := pcap.NewWriter(w, layers.LinkTypeEthernet, 65535)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	ts := capgen.DefaultStart.UnixNano()
	for _, s := range []int{0, 2} {
		seq := uint32(1000)
		if s == 2 {
			seq += uint32(len(segs[0]) + len(segs[1]))
		}
		for i := range n {
			server := capgen.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 9000}
			client := capgen.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, Addr: netip.AddrFrom4([4]byte{10, 2, byte(i >> 16), 1}), Port: 40000}
			buf = capgen.AppendDataFrame(buf[:0], server, client, seq, segs[s])
			if err := pw.WriteFrame(ts, buf, len(buf)); err != nil {
				t.Fatal(err)
			}
			ts += 100
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
}

// holeRecords is the number of records a flow of holeCapture delivers: the
// messages whole in its first or third segment.
func holeRecords(t testing.TB) uint64 {
	segs := holeStream(t)
	fd := sse.NewFeedDecoder(sse.FeedConfig{}, nopFeedHandler{})
	_ = fd.Feed(segs[0])
	fd.Discontinuity(int64(len(segs[1])))
	_ = fd.Feed(segs[2])
	return fd.Stats().Trades
}

type nopFeedHandler struct{}

func (nopFeedHandler) OnTrade(*sse.Trade)           {}
func (nopFeedHandler) OnOrder(*sse.Order)           {}
func (nopFeedHandler) OnGap(uint32, uint64, uint64) {}

// TestManyHolesStayBounded: thousands of flow directions that each hold a
// hole, far more than -buffer-total has room for. Every lost byte is
// reported (delivered bytes and gaps add up to every stream), the records
// outside the holes all come out, and memory grows with the directions by
// a few KiB each, not by their buffers: before -buffer-total, each held a
// 32 KiB reassembly buffer, a 64 KiB STEP buffer and an 11 KiB FAST decoder.
func TestManyHolesStayBounded(t *testing.T) {
	n := 20000
	if raceEnabled {
		n = 2000
	}
	var capture bytes.Buffer
	writeHoleCapture(t, &capture, n)
	path := filepath.Join(t.TempDir(), "holes.pcap")
	if err := os.WriteFile(path, capture.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	capture = bytes.Buffer{}
	segs := holeStream(t)
	const total = 1 << 20 // room for 24 reassembly buffers and 256 KiB of STEP buffers
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stdout, stderr, code := mirrorfeed(t, "-quiet", "-pcap", path, "-max-flows", "32768", "-buffer-total", fmt.Sprint(total))
	runtime.ReadMemStats(&after)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := fmt.Sprintf("summary: %d records (%d trades, 0 orders), %d frames, %d flow directions, %d bytes delivered, %d gaps (%d bytes)",
		uint64(n)*holeRecords(t), uint64(n)*holeRecords(t), 2*n, n, n*(len(segs[0])+len(segs[2])), n, n*len(segs[1]))
	if !strings.HasPrefix(stdout, want) {
		t.Fatalf("summary\n%s\nwant it to start with\n%s", stdout, want)
	}
	// Both bounds were reached: holes skipped early, unfinished messages
	// dropped (each would have been lost to its hole anyway).
	m := regexp.MustCompile(`, (\d+) step sequence gaps, .*, (\d+) buffer-total skips, (\d+) unfinished STEP messages dropped \(\d+ bytes\)\n$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("summary %q lacks the step sequence gaps or the bounds' counts", stdout)
	}
	seqGaps, _ := strconv.Atoi(m[1])
	skips, _ := strconv.Atoi(m[2])
	drops, _ := strconv.Atoi(m[3])
	if seqGaps != n || skips < n-100 || drops < n/2 {
		t.Fatalf("summary %q: want most holes skipped and unfinished messages dropped at the bound", stdout)
	}
	// Allocation in all, garbage included, is a constant (the flow table
	// for -max-flows, the read batch, the bounded buffers: under 16 MiB)
	// plus about 1.5 KiB per direction (flow state, decoder, map entry).
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d directions: %d bytes allocated (%d per direction); heap in use %d MiB", n, alloc, alloc/uint64(n), after.HeapInuse>>20)
	if limit := uint64(16<<20 + n*2<<10); alloc > limit {
		t.Errorf("%d bytes allocated for %d directions, want at most 16 MiB + 2 KiB per direction (%d)", alloc, n, limit)
	}
}
