package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/shareddata"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/mirror"
)

// mirrorfeed runs the program in-process with a deadline, so a hang fails the
// test instead of stalling it, and a panic fails it too.
func mirrorfeed(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), args, &out, &errb) }()
	select {
	case code = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("mirrorfeed %q did not finish within a minute", args)
	}
	return out.String(), errb.String(), code
}

// writeFeed generates a feed and writes its capture into dir.
func writeFeed(t *testing.T, dir string, opt capgen.Options, extra ...capgen.Frame) (*capgen.Feed, string) {
	t.Helper()
	f, err := capgen.Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	f.Frames = append(f.Frames, extra...)
	var buf bytes.Buffer
	if err := f.WritePcap(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "feed.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f, path
}

// output is mirrorfeed's JSON output, by flow.
type output struct {
	trades map[string][]capgen.Trade
	orders map[string][]capgen.Order
	gaps   map[string][]capgen.Range
}

func parseJSON(t *testing.T, stdout string) output {
	t.Helper()
	o := output{map[string][]capgen.Trade{}, map[string][]capgen.Order{}, map[string][]capgen.Range{}}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Type     string          `json:"type"`
			Flow     string          `json:"flow"`
			Template int             `json:"template"`
			Fields   json.RawMessage `json:"fields"`
			Offset   uint64          `json:"offset"`
			Length   uint64          `json:"length"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		switch line.Type {
		case "trade":
			var tr capgen.Trade
			if err := json.Unmarshal(line.Fields, &tr); err != nil || line.Template != capgen.TemplateTrade {
				t.Fatalf("trade line %q: %v", sc.Text(), err)
			}
			o.trades[line.Flow] = append(o.trades[line.Flow], tr)
		case "order":
			var or capgen.Order
			if err := json.Unmarshal(line.Fields, &or); err != nil || line.Template != capgen.TemplateOrder {
				t.Fatalf("order line %q: %v", sc.Text(), err)
			}
			o.orders[line.Flow] = append(o.orders[line.Flow], or)
		case "gap":
			o.gaps[line.Flow] = append(o.gaps[line.Flow], capgen.Range{Offset: line.Offset, Length: line.Length})
		default:
			t.Fatalf("output line of unknown type: %q", sc.Text())
		}
	}
	return o
}

func touches(r capgen.Record, lost []capgen.Range) bool {
	for _, l := range lost {
		if r.Start < l.Offset+l.Length && l.Offset < r.End {
			return true
		}
	}
	return false
}

// expectedGaps is what the reassembler must report for a flow: every lost
// range before the last delivered byte (a loss at the very end of the
// stream is not a gap, nothing follows it).
func expectedGaps(fl *capgen.Flow) []capgen.Range {
	gaps := []capgen.Range{}
	for _, l := range fl.Lost {
		if l.Offset+l.Length < fl.StreamBytes {
			gaps = append(gaps, l)
		}
	}
	return gaps
}

// delivered returns the stream without its lost bytes, up to the last
// delivered byte: the content the .bin file must hold.
func delivered(fl *capgen.Flow) []byte {
	var b []byte
	next := uint64(0)
	for _, l := range fl.Lost {
		b = append(b, fl.Stream[next:l.Offset]...)
		next = l.Offset + l.Length
	}
	return append(b, fl.Stream[next:]...)
}

// checkAgainstTruth checks that the output holds, per flow and in order,
// exactly the records whose STEP message no lost range touches, and that the
// reported gaps are the lost ranges.
func checkAgainstTruth(t *testing.T, f *capgen.Feed, o output) {
	t.Helper()
	for fi := range f.Flows {
		fl := &f.Flows[fi]
		var wantTrades []capgen.Trade
		var wantOrders []capgen.Order
		for _, r := range f.Records {
			if r.Flow != fi || touches(r, fl.Lost) {
				continue
			}
			if r.Trade != nil {
				wantTrades = append(wantTrades, *r.Trade)
			} else {
				wantOrders = append(wantOrders, *r.Order)
			}
		}
		key := fl.Key()
		if got := o.trades[key]; !reflect.DeepEqual(got, wantTrades) {
			t.Errorf("flow %s: %d trades, want %d%s", key, len(got), len(wantTrades), firstDifference(got, wantTrades))
		}
		if got := o.orders[key]; !reflect.DeepEqual(got, wantOrders) {
			t.Errorf("flow %s: %d orders, want %d%s", key, len(got), len(wantOrders), firstDifference(got, wantOrders))
		}
		if got, want := o.gaps[key], expectedGaps(fl); !(len(got) == 0 && len(want) == 0) && !reflect.DeepEqual(got, want) {
			t.Errorf("flow %s: gaps %v, want the lost ranges %v", key, got, want)
		}
		if len(wantTrades)+len(wantOrders) == 0 {
			t.Errorf("flow %s: the test lost every record", key)
		}
	}
}

func firstDifference[T any](got, want []T) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return fmt.Sprintf("; first difference at %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	return ""
}

// checkRaw checks the -raw files of every generated flow: the server
// direction's .bin holds the delivered bytes and .gaps.json the gaps; the
// client directions, which carry no data, have no files.
func checkRaw(t *testing.T, dir string, f *capgen.Feed) {
	t.Helper()
	for fi := range f.Flows {
		fl := &f.Flows[fi]
		base := filepath.Join(dir, rawName(flowKey(fl), 1))
		bin, err := os.ReadFile(base + ".bin")
		if err != nil {
			t.Fatal(err)
		}
		if want := delivered(fl); !bytes.Equal(bin, want) {
			t.Errorf("%s.bin: %d bytes, want the %d delivered", base, len(bin), len(want))
		}
		gj, err := os.ReadFile(base + ".gaps.json")
		if err != nil {
			t.Fatal(err)
		}
		var gaps []capgen.Range
		if err := json.Unmarshal(gj, &gaps); err != nil || gaps == nil {
			t.Fatalf("%s.gaps.json = %q: not a JSON array (%v)", base, gj, err)
		}
		if want := expectedGaps(fl); !reflect.DeepEqual(gaps, want) {
			t.Errorf("%s.gaps.json = %v, want %v", base, gaps, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2*len(f.Flows) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("-raw wrote %v, want a .bin and a .gaps.json per server direction only", names)
	}
}

func flowKey(fl *capgen.Flow) (k mirror.FlowKey) {
	k.SrcIP, k.DstIP = fl.Server.Addr.As4(), fl.Client.Addr.As4()
	k.SrcPort, k.DstPort = fl.Server.Port, fl.Client.Port
	return k
}

// The embedded demo capture is exactly what its go:generate line writes.
func TestDemoPcapIsGenerated(t *testing.T) {
	f, err := capgen.Generate(demoOptions)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := f.WritePcap(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), demoPcap) {
		t.Fatal("demo.pcap differs from the generator's output: run go generate ./examples/mirrorfeed")
	}
	if len(demoPcap) > 300<<10 {
		t.Errorf("demo.pcap is %d bytes, over the 300 KB budget", len(demoPcap))
	}
}

// demoOptions are the options of the go:generate line in main.go.
var demoOptions = capgen.Options{
	Messages: 800, Seed: 2026, Flows: 2,
	Impair: capgen.Impairments{Loss: 0.005, Reorder: 0.02, Dup: 0.02, Overlap: 0.02},
}

func TestDemo(t *testing.T) {
	stdout, stderr, code := mirrorfeed(t)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	summary := lines[len(lines)-1]
	if !strings.HasPrefix(summary, "summary: ") || !strings.Contains(summary, "records/s") {
		t.Fatalf("last line %q is not the summary", summary)
	}
	var trades, orders int
	for _, l := range lines[:len(lines)-1] {
		switch {
		case strings.Contains(l, " trade "):
			trades++
		case strings.Contains(l, " order "):
			orders++
		}
	}
	if want := fmt.Sprintf("summary: %d records (%d trades, %d orders)", trades+orders, trades, orders); !strings.HasPrefix(summary, want) {
		t.Errorf("summary %q; printed %d trades and %d orders", summary, trades, orders)
	}
	t.Log(summary)

	// The same feed as JSON matches the truth.
	f, _ := capgen.Generate(demoOptions)
	stdout, stderr, code = mirrorfeed(t, "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkAgainstTruth(t, f, parseJSON(t, stdout))
	if !strings.Contains(stderr, "summary: ") {
		t.Errorf("with -format json the summary goes to stderr; stderr is %q", stderr)
	}
}

// TestNoLossRecoversEveryRecord: reordering, duplicates and overlapping
// retransmissions, VLAN tags, sequence numbers that wrap, three flows; every
// record comes out, in order, and -raw holds each stream whole.
func TestNoLossRecoversEveryRecord(t *testing.T) {
	dir := t.TempDir()
	opt := capgen.Options{Messages: 1500, Seed: 11, Flows: 3, VLAN: 42, WrapISN: true,
		Impair: capgen.Impairments{Reorder: 0.05, Dup: 0.05, Overlap: 0.05}}
	// A pure ACK repeated a second after the first flow closed must not
	// start a flow again or overwrite its files.
	probe, _ := capgen.Generate(opt)
	var lastServerFrame capgen.Frame
	for _, fr := range probe.Frames {
		if bytes.Equal(fr.Data[6:12], probe.Flows[0].Server.MAC[:]) {
			lastServerFrame = fr
		}
	}
	late := capgen.Frame{Time: probe.Frames[len(probe.Frames)-1].Time + int64(time.Second), Data: lastServerFrame.Data}
	f, pcapPath := writeFeed(t, dir, opt, late)

	raw := filepath.Join(dir, "raw")
	stdout, stderr, code := mirrorfeed(t, "-pcap", pcapPath, "-format", "json", "-raw", raw)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	o := parseJSON(t, stdout)
	checkAgainstTruth(t, f, o)
	for k, g := range o.gaps {
		t.Errorf("flow %s: gaps %v without loss", k, g)
	}
	checkRaw(t, raw, f)
	if !strings.Contains(stderr, " 0 gaps (0 bytes), 0 anomalies") {
		t.Errorf("summary: %s", stderr)
	}
}

// TestLossRecoversEveryUntouchedRecord: with 3% of the segments lost, every
// record whose STEP message no loss touches comes out, the losses are
// reported as gaps, and the STEP sequence numbers show the lost messages.
func TestLossRecoversEveryUntouchedRecord(t *testing.T) {
	dir := t.TempDir()
	f, pcapPath := writeFeed(t, dir, capgen.Options{Messages: 1500, Seed: 12, Flows: 2,
		Impair: capgen.Impairments{Loss: 0.03, Reorder: 0.05, Dup: 0.03, Overlap: 0.03}})
	lost := 0
	for _, fl := range f.Flows {
		lost += len(expectedGaps(&fl))
	}
	if lost < 2 {
		t.Fatalf("the seed lost only %d ranges; pick another", lost)
	}
	raw := filepath.Join(dir, "raw")
	stdout, stderr, code := mirrorfeed(t, "-pcap", pcapPath, "-format", "json", "-raw", raw)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkAgainstTruth(t, f, parseJSON(t, stdout))
	checkRaw(t, raw, f)
	if !strings.Contains(stderr, fmt.Sprintf(" %d gaps (", lost)) || strings.Contains(stderr, " 0 step sequence gaps") {
		t.Errorf("summary does not report %d gaps and the STEP sequence gaps: %s", lost, stderr)
	}
}

func TestTextAndCSV(t *testing.T) {
	dir := t.TempDir()
	f, pcapPath := writeFeed(t, dir, capgen.Options{Messages: 40, Seed: 13})
	stdout, stderr, code := mirrorfeed(t, "-pcap", pcapPath, "-format", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if lines[0]+"\n" != csvHeader || len(lines)-1 != len(f.Records) {
		t.Fatalf("csv: header %q and %d rows, want %d", lines[0], len(lines)-1, len(f.Records))
	}
	cols := strings.Count(csvHeader, ",") + 1
	for i, l := range lines[1:] {
		fields := strings.Split(l, ",")
		r := f.Records[i]
		if len(fields) != cols {
			t.Fatalf("csv row %q: %d columns, want %d", l, len(fields), cols)
		}
		if r.Trade != nil {
			if fields[0] != "trade" || fields[5] != r.Trade.SecurityID || fields[15] != strconv.FormatUint(r.Trade.BizIndex, 10) {
				t.Fatalf("csv row %q for %+v", l, r.Trade)
			}
		} else if fields[0] != "order" || fields[7] != r.Order.OrderType || fields[12] != strconv.FormatUint(r.Order.OrderNO, 10) {
			t.Fatalf("csv row %q for %+v", l, r.Order)
		}
	}

	stdout, _, code = mirrorfeed(t, "-pcap", pcapPath, "-quiet")
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "summary: ") {
		t.Errorf("-quiet printed %q", stdout)
	}
}

// TestRawOnSharedCaptures runs -decode none -raw over every shared capture:
// the documented results of the suricata-verify captures, and the format
// rules on all of them.
func TestRawOnSharedCaptures(t *testing.T) {
	capDir := shareddata.Path(t, "captures")
	files, _ := filepath.Glob(filepath.Join(capDir, "*.pcap"))
	if len(files) == 0 {
		t.Skip("no captures in " + capDir)
	}
	// Client-to-server bytes and gaps documented in SOURCES.md.
	documented := map[string]struct {
		bin  string
		gaps string
	}{
		"sv_tcp-overlap-exact":   {"GOOD", "[]"},
		"sv_tcp-overlap-partial": {"GOOD", "[]"},
		"sv_tcp-simple-gap":      {"VERYDATA", `[{"offset":4,"length":4}]`},
		"sv_tcp-leading-gap":     {"GOODDATA", `[{"offset":0,"length":4}]`},
	}
	tshark, _ := exec.LookPath("tshark")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".pcap")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := t.TempDir()
			stdout, stderr, code := mirrorfeed(t, "-pcap", file, "-decode", "none", "-raw", raw, "-quiet")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			// Wireshark's reassembly is a second opinion wherever it
			// sees the same segments: it keeps frames with bad checksums
			// or cut short by the capture, which the reassembler drops.
			if tshark != "" && !strings.Contains(stdout, "frames dropped") {
				follow := tsharkFollow(t, tshark, file)
				if bins, _ := filepath.Glob(filepath.Join(raw, "*.bin")); len(follow) != len(bins) {
					t.Errorf("%d directions with data, Wireshark finds %d", len(bins), len(follow))
				}
				for dir, want := range follow {
					got, _ := os.ReadFile(filepath.Join(raw, dir+".bin"))
					if !bytes.Equal(got, want) {
						t.Errorf("%s.bin: %d bytes, Wireshark reassembles %d different ones", dir, len(got), len(want))
					}
				}
			}
			bins, _ := filepath.Glob(filepath.Join(raw, "*.bin"))
			all, _ := os.ReadDir(raw)
			if len(all) != 2*len(bins) {
				t.Fatalf("%d files for %d .bin files: every .bin needs its .gaps.json", len(all), len(bins))
			}
			for _, bin := range bins {
				gj, err := os.ReadFile(strings.TrimSuffix(bin, ".bin") + ".gaps.json")
				if err != nil {
					t.Fatal(err)
				}
				var gaps []capgen.Range
				if err := json.Unmarshal(gj, &gaps); err != nil || gaps == nil {
					t.Fatalf("%s: %q is not a JSON array", bin, gj)
				}
				data, _ := os.ReadFile(bin)
				if len(data) == 0 {
					t.Errorf("%s is empty: files exist only for directions that delivered data", bin)
				}
				end := uint64(0)
				for i, g := range gaps {
					if g.Length == 0 || (i > 0 && g.Offset <= end) {
						t.Errorf("%s: gaps %v not sorted, separate and non-empty", bin, gaps)
					}
					end = g.Offset + g.Length
				}
				if doc, ok := documented[name]; ok && strings.Contains(bin, "1.1.1.1_12345-") {
					if string(data) != doc.bin || strings.TrimSpace(string(gj)) != doc.gaps {
						t.Errorf("%s: %q with gaps %s, want %q with %s", filepath.Base(bin), data, gj, doc.bin, doc.gaps)
					}
				}
			}
		})
	}
}

func TestBadCaptures(t *testing.T) {
	dir := t.TempDir()
	_, good := writeFeed(t, dir, capgen.Options{Messages: 100, Seed: 14})
	whole, _ := os.ReadFile(good)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A record header claiming more bytes than libpcap ever writes.
	huge := append([]byte(nil), whole[:24]...)
	huge = append(huge, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f)
	for _, c := range []struct {
		name, path, want string
	}{
		{"too many interfaces", write("idbs.pcapng", interfaceFlood(pcap.MaxInterfaces+1)), "too many interfaces"},
		{"missing", filepath.Join(dir, "nosuch.pcap"), "no such file"},
		{"empty", write("empty.pcap", nil), "mirrorfeed: "},
		{"not a capture", write("text.pcap", []byte("this is not a capture file at all, just text\n")), "unknown file format"},
		{"truncated", write("cut.pcap", whole[:len(whole)*2/3]), "truncated"},
		{"huge record", write("huge.pcap", huge), "mirrorfeed: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := mirrorfeed(t, "-pcap", c.path, "-quiet")
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want a failure mentioning %q", code, stderr, c.want)
			}
			if strings.Contains(stderr, "panic") {
				t.Fatal(stderr)
			}
		})
	}
	// The records before the cut are still decoded and summarised.
	stdout, _, _ := mirrorfeed(t, "-pcap", filepath.Join(dir, "cut.pcap"), "-quiet")
	if !strings.HasPrefix(stdout, "summary: ") || strings.HasPrefix(stdout, "summary: 0 records") {
		t.Errorf("truncated capture: summary %q", stdout)
	}
}

// interfaceFlood returns a little-endian pcapng file of one section with n
// interface descriptions and nothing else, as in issue 12.
func interfaceFlood(n int) []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 0x0a0d0d0a) // section header
	b = le.AppendUint32(b, 28)
	b = le.AppendUint32(b, 0x1a2b3c4d)
	b = le.AppendUint32(b, 1) // version 1.0
	b = le.AppendUint64(b, ^uint64(0))
	b = le.AppendUint32(b, 28)
	for range n {
		b = le.AppendUint32(b, 1) // interface description
		b = le.AppendUint32(b, 20)
		b = le.AppendUint32(b, 1) // Ethernet
		b = le.AppendUint32(b, 0)
		b = le.AppendUint32(b, 20)
	}
	return b
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-format", "xml"},
		{"-decode", "fix"},
		{"-checksum", "sometimes"},
		{"-buffer", "0"},
		{"-max-flows", "0"},
		{"-buffer-total", "200000"},
		{"-buffer", "1048576", "-buffer-total", "1048576"},
		{"-hole-timeout", "0s"},
		{"-pcap", "a.pcap", "-iface", "eth0"},
		{"stray"},
	} {
		if _, stderr, code := mirrorfeed(t, args...); code != 2 || stderr == "" {
			t.Errorf("mirrorfeed %q: exit %d, stderr %q; want usage error 2", args, code, stderr)
		}
	}
}

// TestCaptureFormats reads the same feed as classic pcap in its four
// variants (little or big endian, micro or nanosecond timestamps) and, when
// tshark is installed to convert it, as pcapng: every record comes out of
// each.
func TestCaptureFormats(t *testing.T) {
	dir := t.TempDir()
	f, pcapPath := writeFeed(t, dir, capgen.Options{Messages: 200, Seed: 18, Flows: 2, Impair: capgen.Impairments{Reorder: 0.05}})
	leNano, err := os.ReadFile(pcapPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name         string
		order        binary.AppendByteOrder
		microseconds bool
	}{
		{"le-nano", binary.LittleEndian, false}, {"le-micro", binary.LittleEndian, true},
		{"be-nano", binary.BigEndian, false}, {"be-micro", binary.BigEndian, true},
	} {
		path := filepath.Join(dir, v.name+".pcap")
		if err := os.WriteFile(path, convertPcap(t, leNano, v.order, v.microseconds), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := mirrorfeed(t, "-pcap", path, "-format", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", v.name, code, stderr)
		}
		checkAgainstTruth(t, f, parseJSON(t, stdout))
	}

	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed; skipping the pcapng conversion")
	}
	for _, format := range []string{"pcapng"} {
		conv := filepath.Join(dir, "feed."+format)
		if out, err := exec.Command(tshark, "-r", pcapPath, "-F", format, "-w", conv).CombinedOutput(); err != nil {
			t.Fatalf("tshark -F %s: %v\n%s", format, err, out)
		}
		stdout, stderr, code := mirrorfeed(t, "-pcap", conv, "-format", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, stderr)
		}
		checkAgainstTruth(t, f, parseJSON(t, stdout))
	}
}

func TestProgressLine(t *testing.T) {
	defer func(d time.Duration) { progressInterval = d }(progressInterval)
	progressInterval = 0 // a line after every batch
	_, stderr, code := mirrorfeed(t, "-quiet")
	if code != 0 || !strings.Contains(stderr, "\rmirrorfeed: ") || !strings.Contains(stderr, " frames, ") || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("exit %d, stderr %q: want progress lines ended by a newline", code, stderr)
	}
}

// TestRawSecondConnection: a new connection on the same addresses and ports
// (a new SYN after the first one closed) goes to <name>.2.bin, and the first
// connection's files stay as they were.
func TestRawSecondConnection(t *testing.T) {
	dir := t.TempDir()
	first, err := capgen.Generate(capgen.Options{Messages: 30, Seed: 19})
	if err != nil {
		t.Fatal(err)
	}
	second, err := capgen.Generate(capgen.Options{Messages: 30, Seed: 20, Start: capgen.DefaultStart.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	_, pcapPath := writeFeed(t, dir, capgen.Options{Messages: 30, Seed: 19}, second.Frames...)
	raw := filepath.Join(dir, "raw")
	_, stderr, code := mirrorfeed(t, "-pcap", pcapPath, "-raw", raw, "-quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	base := filepath.Join(raw, rawName(flowKey(&first.Flows[0]), 1))
	for _, c := range []struct {
		path string
		want []byte
	}{{base + ".bin", first.Flows[0].Stream}, {base + ".2.bin", second.Flows[0].Stream}} {
		got, err := os.ReadFile(c.path)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes (%v), want the %d of its connection", c.path, len(got), err, len(c.want))
		}
	}
	if _, err := os.Stat(base + ".2.gaps.json"); err != nil {
		t.Error(err)
	}
}

// tsharkFollow returns Wireshark's reassembly of TCP stream 0 of a capture,
// per direction named as -raw names files, without the "[N bytes missing in
// capture file]" markers it puts in place of gaps.
func tsharkFollow(t *testing.T, tshark, file string) map[string][]byte {
	t.Helper()
	out, err := exec.Command(tshark, "-r", file, "-qz", "follow,tcp,raw,0").Output()
	if err != nil {
		t.Fatalf("tshark follow: %v", err)
	}
	var nodes [2]string
	data := [2][]byte{}
	missing := regexp.MustCompile(`^\[\d+ bytes missing in capture file\]\x00?$`)
	for _, line := range strings.Split(string(out), "\n") {
		var n int
		var addr string
		if _, err := fmt.Sscanf(line, "Node %d: %s", &n, &addr); err == nil && n >= 0 && n < 2 {
			i := strings.LastIndexByte(addr, ':')
			nodes[n] = addr[:i] + "_" + addr[i+1:]
			continue
		}
		if nodes[1] == "" || line == "" || strings.HasPrefix(line, "=") {
			continue
		}
		side := 0
		if strings.HasPrefix(line, "\t") {
			side = 1
		}
		b, err := hex.DecodeString(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("tshark follow line %q: %v", line, err)
		}
		if !missing.Match(b) {
			data[side] = append(data[side], b...)
		}
	}
	res := map[string][]byte{}
	for side := range 2 {
		if len(data[side]) > 0 {
			res[nodes[side]+"-"+nodes[1-side]] = data[side]
		}
	}
	return res
}

// convertPcap rewrites a little-endian nanosecond pcap file (what
// capgen.WritePcap writes) in the given byte order and timestamp resolution.
func convertPcap(t *testing.T, in []byte, order binary.AppendByteOrder, microseconds bool) []byte {
	t.Helper()
	if len(in) < 24 || binary.LittleEndian.Uint32(in) != 0xa1b23c4d {
		t.Fatal("not a little-endian nanosecond pcap")
	}
	out := make([]byte, 0, len(in))
	magic := uint32(0xa1b23c4d)
	if microseconds {
		magic = 0xa1b2c3d4
	}
	out = order.AppendUint32(out, magic)
	out = order.AppendUint16(out, binary.LittleEndian.Uint16(in[4:]))
	out = order.AppendUint16(out, binary.LittleEndian.Uint16(in[6:]))
	for off := 8; off < 24; off += 4 {
		out = order.AppendUint32(out, binary.LittleEndian.Uint32(in[off:]))
	}
	for rest := in[24:]; len(rest) > 0; {
		if len(rest) < 16 {
			t.Fatal("cut record header")
		}
		sec, frac := binary.LittleEndian.Uint32(rest), binary.LittleEndian.Uint32(rest[4:])
		incl, orig := binary.LittleEndian.Uint32(rest[8:]), binary.LittleEndian.Uint32(rest[12:])
		if microseconds {
			frac /= 1000
		}
		for _, v := range []uint32{sec, frac, incl, orig} {
			out = order.AppendUint32(out, v)
		}
		out = append(out, rest[16:16+incl]...)
		rest = rest[16+incl:]
	}
	return out
}

// An interrupt (a cancelled context) stops a file replay with the summary
// of what was read and a non-zero status.
func TestInterruptedFile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-quiet"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "interrupted") || !strings.HasPrefix(stdout.String(), "summary: ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
