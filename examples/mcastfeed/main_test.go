package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/tickwire/tickwire/arb"
	"github.com/tickwire/tickwire/link/pcap"
)

// udpFrame builds an Ethernet/IPv4/UDP frame (checksums left 0: the
// decoder does not verify them by default).
func udpFrame(src, dst netip.AddrPort, payload []byte) []byte {
	f := make([]byte, 14+28+len(payload))
	copy(f, []byte{0x01, 0x00, 0x5e, 1, 1, 1, 2, 0, 0, 0, 0, 1, 0x08, 0x00})
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	ip[8], ip[9] = 1, 17
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], payload)
	return f
}

type rec struct {
	t   int64
	src netip.AddrPort
	dst netip.AddrPort
	p   []byte
}

func writePcap(t *testing.T, recs []rec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "feed.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, layers.LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteFrame(r.t, udpFrame(r.src, r.dst, r.p), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func msgBytes(seq int) []byte { return []byte(fmt.Sprintf("msg %d \x00\xff", seq)) }

func runFeed(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Logf("stderr:\n%s", errb.String())
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m)
	}
	return got
}

func msgObj(session string, seq int, line string) map[string]any {
	return map[string]any{"session": session, "seq": float64(seq), "line": line, "data": hex.EncodeToString(msgBytes(seq))}
}

func gapObj(from, to int) map[string]any {
	return map[string]any{"gap_from": float64(from), "gap_to": float64(to)}
}

var (
	srcA   = netip.MustParseAddrPort("10.1.0.1:40000")
	srcB   = netip.MustParseAddrPort("10.2.0.1:40000")
	groupA = netip.MustParseAddrPort("239.1.1.1:5000")
	groupB = netip.MustParseAddrPort("239.1.1.2:5000")
)

// feed builds n messages in packets of 1 to 3, sends each packet on A
// (at t) and B (at t+lagB), losing packets per line with the given
// probabilities (never the first of the last three packets on A when
// keepTailA), and ends with an end-of-session packet on both lines. It
// returns the records in time order and, per sequence number, which line
// carries it first ("" for neither).
func feed(rng *rand.Rand, n int, lossA, lossB float64, lagB time.Duration, dstB netip.AddrPort, keepTailA bool) ([]rec, []string) {
	first := make([]string, n+1)
	var recs []rec
	t := int64(1_700_000_000_000_000_000)
	type pk struct {
		seq, k int
		p      []byte
	}
	var pkts []pk
	for seq := 1; seq <= n; {
		k := min(1+rng.IntN(3), n+1-seq)
		var msgs [][]byte
		for i := 0; i < k; i++ {
			msgs = append(msgs, msgBytes(seq+i))
		}
		pkts = append(pkts, pk{seq, k, arb.AppendMold(nil, "SESS01", uint64(seq), 0, msgs...)})
		seq += k
	}
	var bq []rec
	for i, p := range pkts {
		t += int64(time.Millisecond)
		keepA := keepTailA && i >= len(pkts)-1
		hasA := keepA || rng.Float64() >= lossA
		hasB := rng.Float64() >= lossB
		if i == 0 {
			hasA, hasB = false, false // a loss at the very start
		}
		// Flush B copies due before this A packet.
		for len(bq) > 0 && bq[0].t <= t {
			recs, bq = append(recs, bq[0]), bq[1:]
		}
		if hasA {
			recs = append(recs, rec{t, srcA, groupA, p.p})
		}
		if hasB {
			bq = append(bq, rec{t + int64(lagB) + 1, srcB, dstB, p.p})
		}
		for j := 0; j < p.k; j++ {
			switch {
			case hasA:
				first[p.seq+j] = "A"
			case hasB:
				first[p.seq+j] = "B"
			}
		}
	}
	recs = append(recs, bq...)
	t = recs[len(recs)-1].t + int64(time.Millisecond)
	end := arb.AppendMold(nil, "SESS01", uint64(n+1), arb.MoldEndOfSession)
	recs = append(recs, rec{t, srcA, groupA, end}, rec{t + 1, srcB, dstB, end})
	return recs, first
}

func expected(first []string, lostLine func(seq int) bool) []map[string]any {
	var want []map[string]any
	from := 0
	for seq := 1; seq < len(first); seq++ {
		if first[seq] == "" || lostLine(seq) {
			if from == 0 {
				from = seq
			}
			continue
		}
		if from != 0 {
			want = append(want, gapObj(from, seq-1))
			from = 0
		}
		want = append(want, msgObj("SESS01", seq, first[seq]))
	}
	if from != 0 {
		want = append(want, gapObj(from, len(first)-1))
	}
	return want
}

func TestPcapTwoLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs, first := feed(rng, 500, 0.10, 0.25, 200*time.Microsecond, groupB, false)
	path := writePcap(t, recs)
	got := runFeed(t, "-pcap", path, "-line", "A="+groupA.String(), "-line", "B="+groupB.String(), "-format", "json")
	want := expected(first, func(int) bool { return false })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %d objects, want %d", len(got), len(want))
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("object %d: got %v, want %v", i, got[i], want[i])
			}
		}
	}
	if len(want) < 400 || want[0]["gap_from"] != float64(1) {
		t.Fatalf("the feed does not test much: %d objects, first %v", len(want), want[0])
	}
}

// Line B lags 50ms behind A with a 10ms gap timeout: every hole in A is
// declared lost before B's copy arrives, which is then late.
func TestPcapLateLine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs, first := feed(rng, 300, 0.10, 0.0, 50*time.Millisecond, groupB, true)
	path := writePcap(t, recs)
	got := runFeed(t, "-pcap", path, "-line", "A="+groupA.String(), "-line", "B="+groupB.String(),
		"-gap-timeout", "10ms", "-format", "json")
	want := expected(first, func(seq int) bool { return first[seq] == "B" })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// Both lines on one group, told apart by source address.
func TestPcapLinesBySource(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs, first := feed(rng, 200, 0.2, 0.2, time.Millisecond/2, groupA, false)
	path := writePcap(t, recs)
	got := runFeed(t, "-pcap", path, "-line", "A="+groupA.String()+"@"+srcA.Addr().String(),
		"-line", "B="+groupA.String()+"@"+srcB.Addr().String(), "-format", "json")
	want := expected(first, func(int) bool { return false })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestFlags(t *testing.T) {
	path := writePcap(t, []rec{{1, srcA, groupA, arb.AppendMold(nil, "S", 1, 0, []byte("x"))}})
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-line", "A=239.1.1.1:5000"}, 2},
		{[]string{"-pcap", path}, 2},
		{[]string{"-pcap", path, "-line", "A=239.1.1.1"}, 2},
		{[]string{"-pcap", path, "-line", "A=239.1.1.1:5000", "-line", "B=239.1.1.1:5000"}, 2},
		{[]string{"-pcap", path, "-line", "A=239.1.1.1:5000", "-format", "csv"}, 2},
		{[]string{"-pcap", path, "-line", "A=239.1.1.1:5000", "-gap-timeout", "0s"}, 2},
		{[]string{"-pcap", filepath.Join(t.TempDir(), "missing"), "-line", "A=239.1.1.1:5000"}, 1},
		{[]string{"-iface", "lo", "-line", "A=239.1.1.1:5000", "-line", "B=239.1.1.1:5000"}, 2},
		{[]string{"-iface", "A=lo", "-line", "A=239.1.1.1:5000", "-line", "B=239.1.1.1:5000"}, 2},
		{[]string{"-iface", "C=lo", "-iface", "lo", "-line", "A=239.1.1.1:5000"}, 2},
		{[]string{"-iface", "lo", "-iface", "lo", "-line", "A=239.1.1.1:5000"}, 2},
		{[]string{"-iface", "A=lo", "-iface", "A=eth0", "-line", "A=239.1.1.1:5000"}, 2},
		{[]string{"-iface", "A=lo", "-pcap", path, "-line", "A=239.1.1.1:5000"}, 2},
		{[]string{"-pcap", path, "-line", "A=239.1.1.1:5000"}, 0},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code {
			t.Errorf("%q: exit %d, want %d (%s)", c.args, code, c.code, errb.String())
		}
	}
}
