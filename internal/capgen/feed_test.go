package capgen_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

type dataSeg struct {
	seq  uint32
	data []byte
}

// parseFlows returns the data segments of each flow's server direction, by
// client port, in capture order, checking every frame's headers and
// checksums on the way with gopacket as an independent decoder.
func parseFlows(t *testing.T, f *capgen.Feed, wantVLAN uint16) map[uint16][]dataSeg {
	t.Helper()
	segs := map[uint16][]dataSeg{}
	for i, fr := range f.Frames {
		if i > 0 && fr.Time < f.Frames[i-1].Time {
			t.Fatalf("frame %d goes back in time", i)
		}
		pkt := gopacket.NewPacket(fr.Data, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("frame %d: %v", i, el.Error())
		}
		if wantVLAN != 0 {
			d, ok := pkt.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q)
			if !ok || d.VLANIdentifier != wantVLAN {
				t.Fatalf("frame %d: VLAN tag missing or wrong", i)
			}
		}
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if got, want := ip.Checksum, ipChecksum(t, ip); got != want {
			t.Fatalf("frame %d: IPv4 checksum %#04x, want %#04x", i, got, want)
		}
		if got, want := tcp.Checksum, tcpChecksum(t, ip, tcp); got != want {
			t.Fatalf("frame %d: TCP checksum %#04x, want %#04x", i, got, want)
		}
		if len(fr.Data) < 60 {
			t.Fatalf("frame %d: %d bytes, shorter than the Ethernet minimum", i, len(fr.Data))
		}
		if tcp.SrcPort == 9129 && len(tcp.Payload) > 0 {
			if len(tcp.Payload) > capgen.DefaultMSS {
				t.Fatalf("frame %d: %d bytes of payload, over the MSS", i, len(tcp.Payload))
			}
			segs[uint16(tcp.DstPort)] = append(segs[uint16(tcp.DstPort)], dataSeg{tcp.Seq, tcp.Payload})
		}
	}
	return segs
}

// ipChecksum recomputes the header checksum with gopacket's serializer.
func ipChecksum(t *testing.T, ip *layers.IPv4) uint16 {
	t.Helper()
	cp := *ip
	buf := gopacket.NewSerializeBuffer()
	if err := cp.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint16(buf.Bytes()[10:])
}

func tcpChecksum(t *testing.T, ip *layers.IPv4, tcp *layers.TCP) uint16 {
	t.Helper()
	cp := *tcp
	cp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, &cp, gopacket.Payload(tcp.Payload)); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint16(buf.Bytes()[16:])
}

// rebuild places every segment at its stream offset; overlapping copies
// must carry the same bytes. It returns the stream and which bytes were seen.
func rebuild(t *testing.T, segs []dataSeg, isn uint32, size uint64) ([]byte, []bool) {
	t.Helper()
	stream := make([]byte, size)
	seen := make([]bool, size)
	for _, s := range segs {
		off := uint64(s.seq - isn - 1)
		if off+uint64(len(s.data)) > size {
			t.Fatalf("segment at offset %d runs past the stream end %d", off, size)
		}
		for k, b := range s.data {
			if seen[off+uint64(k)] && stream[off+uint64(k)] != b {
				t.Fatalf("byte %d sent twice with different values", off+uint64(k))
			}
			stream[off+uint64(k)], seen[off+uint64(k)] = b, true
		}
	}
	return stream, seen
}

type collector struct {
	trades []capgen.Trade
	orders []capgen.Order
	gaps   int
}

func (c *collector) OnTrade(t *sse.Trade)                   { c.trades = append(c.trades, capgen.TradeOf(t)) }
func (c *collector) OnOrder(o *sse.Order)                   { c.orders = append(c.orders, capgen.OrderOf(o)) }
func (c *collector) OnGap(category uint32, exp, got uint64) { c.gaps++ }

func TestCleanFeedDecodesToTruth(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 400, Seed: 7, Flows: 3, VLAN: 6})
	if err != nil {
		t.Fatal(err)
	}
	segs := parseFlows(t, f, 6)
	for fi := range f.Flows {
		fl := &f.Flows[fi]
		if len(fl.Lost) != 0 {
			t.Fatalf("flow %d: lost %v without impairments", fi, fl.Lost)
		}
		stream, seen := rebuild(t, segs[fl.Client.Port], fl.ServerISN, fl.StreamBytes)
		for i, ok := range seen {
			if !ok {
				t.Fatalf("flow %d: byte %d never sent", fi, i)
			}
		}
		var c collector
		dec := sse.NewFeedDecoder(sse.FeedConfig{}, &c)
		// Odd chunk sizes, as TCP may deliver them.
		for off := 0; off < len(stream); off += 977 {
			if err := dec.Feed(stream[off:min(off+977, len(stream))]); err != nil {
				t.Fatalf("flow %d: decode: %v", fi, err)
			}
		}
		var wantTrades []capgen.Trade
		var wantOrders []capgen.Order
		for _, r := range f.Records {
			if r.Flow != fi {
				continue
			}
			if r.Trade != nil {
				wantTrades = append(wantTrades, *r.Trade)
			} else {
				wantOrders = append(wantOrders, *r.Order)
			}
		}
		if !reflect.DeepEqual(c.trades, wantTrades) || !reflect.DeepEqual(c.orders, wantOrders) {
			t.Fatalf("flow %d: decoded %d trades, %d orders; truth has %d, %d (or values differ)",
				fi, len(c.trades), len(c.orders), len(wantTrades), len(wantOrders))
		}
		if c.gaps != 0 || fl.Records != len(wantTrades)+len(wantOrders) || fl.Messages == 0 {
			t.Fatalf("flow %d: %d sequence gaps, flow record count %d", fi, c.gaps, fl.Records)
		}
		if len(wantTrades) == 0 || len(wantOrders) == 0 {
			t.Fatalf("flow %d: want both trades and orders", fi)
		}
	}
}

func TestImpairedFeedCoversAllButLost(t *testing.T) {
	im := capgen.Impairments{Loss: 0.05, Reorder: 0.1, Dup: 0.1, Overlap: 0.1}
	f, err := capgen.Generate(capgen.Options{Messages: 600, Seed: 3, Flows: 2, Impair: im, WrapISN: true})
	if err != nil {
		t.Fatal(err)
	}
	segs := parseFlows(t, f, 0)
	var lostBytes uint64
	for fi := range f.Flows {
		fl := &f.Flows[fi]
		_, seen := rebuild(t, segs[fl.Client.Port], fl.ServerISN, fl.StreamBytes)
		inLost := make([]bool, len(seen))
		for _, r := range fl.Lost {
			lostBytes += r.Length
			for k := r.Offset; k < r.Offset+r.Length; k++ {
				inLost[k] = true
			}
		}
		for i := range seen {
			if seen[i] == inLost[i] {
				t.Fatalf("flow %d byte %d: seen %v but lost %v", fi, i, seen[i], inLost[i])
			}
		}
		// Reordering shows: some segment starts before its predecessor's end.
		reordered := false
		for i := 1; i < len(segs[fl.Client.Port]); i++ {
			a, b := segs[fl.Client.Port][i-1], segs[fl.Client.Port][i]
			reordered = reordered || int32(b.seq-a.seq) < 0
		}
		if !reordered {
			t.Errorf("flow %d: no reordered segment with 10%% reordering", fi)
		}
	}
	if lostBytes == 0 {
		t.Error("5% loss lost nothing")
	}
}

func TestDeterministic(t *testing.T) {
	opt := capgen.Options{Messages: 50, Seed: 42, Flows: 2, Impair: capgen.Impairments{Loss: 0.1, Reorder: 0.1}}
	a, err := capgen.Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := capgen.Generate(opt)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different feeds")
	}
	opt.Seed++
	c, _ := capgen.Generate(opt)
	if reflect.DeepEqual(a.Frames, c.Frames) {
		t.Fatal("different seeds gave the same frames")
	}
}

func TestOptionErrors(t *testing.T) {
	for _, opt := range []capgen.Options{
		{Messages: -1},
		{Messages: capgen.MaxMessages + 1},
		{Flows: capgen.MaxFlows + 1},
		{MSS: 10},
		{VLAN: 4095},
		{Impair: capgen.Impairments{Loss: 1.5}},
		{Impair: capgen.Impairments{Dup: -0.1}},
	} {
		if _, err := capgen.Generate(opt); err == nil || !strings.HasPrefix(err.Error(), "feed: ") {
			t.Errorf("Generate(%+v) error = %v, want a feed: error", opt, err)
		}
	}
}

// TestPcapAndTruthFiles writes both files and reads them back: the capture
// with link/pcap's reader and, when installed, with tshark, which must find
// every checksum good.
func TestPcapAndTruthFiles(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 100, Seed: 5, Impair: capgen.Impairments{Loss: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pcapPath := filepath.Join(dir, "feed.pcap")
	var pbuf, tbuf bytes.Buffer
	if err := f.WritePcap(&pbuf); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteTruth(&tbuf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pcapPath, pbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := pcap.NewReader(bytes.NewReader(pbuf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	batch := frame.NewBatch(16, 2048)
	for {
		k, err := r.ReadFrames(batch)
		for i := range batch[:k] {
			if !bytes.Equal(batch[i].Data(), f.Frames[n].Data) || batch[i].Time != f.Frames[n].Time {
				t.Fatalf("pcap frame %d differs from the generated one", n)
			}
			n++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != len(f.Frames) {
		t.Fatalf("pcap holds %d frames, want %d", n, len(f.Frames))
	}

	lines, err := capgen.ReadTruth(&tbuf)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(f.Records)+len(f.Flows) {
		t.Fatalf("%d truth lines, want %d", len(lines), len(f.Records)+len(f.Flows))
	}
	first, last := lines[0], lines[len(lines)-1]
	if first.Type != "record" || first.Flow != f.Flows[0].Key() || first.Template == 0 || len(first.Fields) < 10 {
		t.Errorf("first truth line %+v", first)
	}
	if last.Type != "flow" || last.Lost == nil || last.StreamBytes != f.Flows[0].StreamBytes {
		t.Errorf("last truth line %+v", last)
	}

	if _, err := exec.LookPath("tshark"); err != nil {
		t.Log("tshark not installed; skipping its checksum check")
		return
	}
	out, err := exec.Command("tshark", "-r", pcapPath, "-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE",
		"-Y", "ip.checksum.status != 1 || tcp.checksum.status != 1 || _ws.malformed || _ws.expert.severity >= error").Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	// Checksum status 1 is "good". Expert errors would flag malformed
	// frames; lost segments only raise warnings.
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Fatalf("tshark flags frames:\n%s", s)
	}
}

func TestSource(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 50, Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	src := f.Source()
	batch := frame.NewBatch(7, 2048)
	var got []capgen.Frame
	for {
		n, err := src.ReadFrames(batch)
		for _, fr := range batch[:n] {
			got = append(got, capgen.Frame{Time: fr.Time, Data: bytes.Clone(fr.Data())})
		}
		if err == io.EOF {
			break
		}
		if err != nil || n == 0 {
			t.Fatalf("ReadFrames = %d, %v before the end", n, err)
		}
	}
	if !reflect.DeepEqual(got, f.Frames) {
		t.Fatalf("read %d frames, want the %d generated", len(got), len(f.Frames))
	}
	allocs := testing.AllocsPerRun(10, func() {
		src := f.Source()
		for {
			if _, err := src.ReadFrames(batch); err != nil {
				break
			}
		}
	})
	if allocs > 1 { // the Source itself
		t.Errorf("%v allocations per pass, want at most 1", allocs)
	}
}
