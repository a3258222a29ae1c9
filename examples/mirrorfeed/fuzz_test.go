package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/captest"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/mirror"
)

// mirrorfeed's input is fuzzed one layer at a time, so that each input costs
// microseconds, not the milliseconds of a whole run:
//
//   - FuzzCaptureReader: capture bytes through the reader, pump and summary
//     (run after the file is opened), with decoding off;
//   - FuzzPipeline: frames through the reassembler, the SSE decoder, the
//     JSON records and the -raw writer;
//   - FuzzFormat: records of any field values through the JSON and CSV
//     formatters.

// maxFuzzInput bounds the inputs of FuzzCaptureReader and FuzzPipeline:
// the seeds are under 8 KiB, and longer inputs only cost time.
const maxFuzzInput = 64 << 10

// watchdog panics if stop is not called within 10 s: a hang is a failure
// too, and the fuzzer records the input that brings the panic.
func watchdog() (stop func() bool) {
	return time.AfterFunc(10*time.Second, func() { panic("mirrorfeed: no result after 10 s: hang") }).Stop
}

// fuzzOptions are run's flag defaults, except -max-flows: mirror.New makes
// the flow table whole, which for the default 1024 directions costs about
// 1 MB and a millisecond, more than the rest of an input; 16 is more than
// a short input uses, and lets the fuzzer reach eviction.
func fuzzOptions() options {
	return options{
		format: "text", decode: "sse",
		buffer: mirror.DefaultBufferPerFlow, holeTimeout: mirror.DefaultHoleTimeout,
		maxFlows: 16, history: true,
	}
}

var summaryFrames = regexp.MustCompile(`^summary: (\d+) frames, `)

// FuzzCaptureReader feeds arbitrary bytes to mirrorfeed as a capture file,
// read from memory: whatever the bytes, the reader refuses the header with a
// typed error, or the run ends with status 0 (a readable capture) or 1 (a
// reported input error, which says where the capture broke), and its summary
// counts the frames the reader read. Seeds (testdata/fuzz/FuzzCaptureReader)
// are a small generated feed in classic pcap, truncated copies of it, a
// pcapng file, and the feed converted to Linux cooked (SLL, SLL2) and raw IP
// captures.
func FuzzCaptureReader(f *testing.F) {
	batch := frame.NewBatch(batchFrames, slotSize) // as run's, reused
	o := fuzzOptions()
	o.decode, o.quiet = "none", true
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		stop := watchdog()
		defer stop()
		r, err := pcap.NewReader(bytes.NewReader(data))
		if err != nil {
			var he *pcap.HeaderError
			var le *pcap.LinkTypeError
			if !errors.As(err, &he) && !errors.As(err, &le) {
				t.Fatalf("header: %T %v", err, err)
			}
			return
		}
		var stdout, stderr bytes.Buffer
		code := process(context.Background(), o, r, false, batch, &stdout, &stderr)
		switch code {
		case 0:
			if stderr.Len() != 0 {
				t.Fatalf("status 0 with stderr %q", stderr.String())
			}
		case 1:
			msg := stderr.String()
			if !strings.HasPrefix(msg, "mirrorfeed: capture ") && !strings.HasPrefix(msg, "mirrorfeed: reading the capture ") {
				t.Fatalf("status 1 with stderr %q", msg)
			}
		default:
			t.Fatalf("exit status %d, stderr %q", code, stderr.String())
		}
		m := summaryFrames.FindStringSubmatch(stdout.String())
		if m == nil || strings.Count(stdout.String(), "\n") != 1 {
			t.Fatalf("stdout is not one summary line: %q", stdout.String())
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n != r.Stats().Frames {
			t.Fatalf("summary counts %d frames, the reader read %d", n, r.Stats().Frames)
		}
	})
}

// FuzzPipeline's input is a list of frames, each a header byte, a
// big-endian uint16 length and that many bytes (fewer for the last one if
// the input ends first). The header's low 3 bits pick the link type from
// pipelineLinkTypes (mod its length) and its high 5 bits are the capture
// time since the previous frame, in milliseconds.
var pipelineLinkTypes = []uint16{
	frame.LinkTypeEthernet, frame.LinkTypeLinuxSLL, frame.LinkTypeLinuxSLL2, frame.LinkTypeRaw, frame.LinkTypeIPv4,
}

// appendPipelineFrame appends one frame in FuzzPipeline's input format.
func appendPipelineFrame(dst []byte, link int, stepMS int64, data []byte) []byte {
	dst = append(dst, byte(link)|byte(min(max(stepMS, 0), 31))<<3)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(data)))
	return append(dst, data...)
}

// pipelineSeed is f's feed in FuzzPipeline's input format, with its frames
// converted to the link type pipelineLinkTypes[link].
func pipelineSeed(tb testing.TB, f *capgen.Feed, link int) []byte {
	var in []byte
	prev := f.Frames[0].Time
	for _, fr := range f.Frames {
		data := fr.Data
		if lt := pipelineLinkTypes[link]; lt != frame.LinkTypeEthernet {
			var ok bool
			if data, ok = captest.FromEthernet(fr.Data, lt); !ok {
				tb.Fatalf("link type %d cannot carry a generated frame", lt)
			}
		}
		in = appendPipelineFrame(in, link, (fr.Time-prev)/1e6, data)
		prev = fr.Time
	}
	return in
}

// memFS is an in-memory file system for the -raw writer. It checks that
// the writer keeps at most maxOpenRaw files open and never writes to a
// closed file.
type memFS struct {
	files   map[string]*bytes.Buffer
	open    int
	maxOpen int
}

type memFile struct {
	fs     *memFS
	buf    *bytes.Buffer
	closed bool
}

func (fs *memFS) openFile(name string, flag int) (io.WriteCloser, error) {
	b, ok := fs.files[name]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok:
		b = new(bytes.Buffer)
		fs.files[name] = b
	case flag&os.O_TRUNC != 0:
		b.Reset()
	case flag&os.O_APPEND == 0:
		return nil, errors.New("memFS: reopened without O_APPEND or O_TRUNC: " + name)
	}
	fs.open++
	fs.maxOpen = max(fs.maxOpen, fs.open)
	return &memFile{fs: fs, buf: b}, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	return f.buf.Write(p)
}

func (f *memFile) Close() error {
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	f.fs.open--
	return nil
}

// FuzzPipeline feeds arbitrary frames to the reassembler and the pipeline,
// with SSE decoding, JSON records and -raw output (to memory) on, as
// `mirrorfeed -format json -raw DIR` runs them. Whatever the frames: no
// panic or hang; every output line is a JSON object of type trade, order
// or gap; the gap lines add up to the reassembler's gap bytes; the -raw
// files hold exactly the delivered bytes, with at most maxOpenRaw open at
// once and a JSON array of gaps beside each; and no write to them fails.
// Seeds are small generated feeds (1 to 3 KB: the fuzzer minimises each
// new input, at a cost that grows with the square of its length), impaired
// and not, in each link type.
func FuzzPipeline(f *testing.F) {
	for i, opt := range []capgen.Options{
		{Messages: 3, Seed: 1},
		{Messages: 4, Seed: 5, Flows: 2, MSS: 120, WrapISN: true,
			Impair: capgen.Impairments{Loss: 0.1, Reorder: 0.2, Dup: 0.2, Overlap: 0.2}},
	} {
		fd, err := capgen.Generate(opt)
		if err != nil {
			f.Fatal(err)
		}
		for link := range pipelineLinkTypes {
			if i == 0 || link == 0 {
				f.Add(pipelineSeed(f, fd, link))
			}
		}
	}
	o := fuzzOptions()
	o.format, o.rawDir = "json", "raw"
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		stop := watchdog()
		defer stop()
		var out bytes.Buffer
		p := newPipeline(o, bufio.NewWriter(&out))
		fs := &memFS{files: map[string]*bytes.Buffer{}}
		p.raw.open = fs.openFile
		d, err := feed.New(o.feedConfig(), p.handler())
		if err != nil {
			t.Fatal(err)
		}
		ts := capgen.DefaultStart.UnixNano()
		for in := data; len(in) > 0; {
			hdr := in[0]
			var n int
			if len(in) >= 3 {
				n = int(binary.BigEndian.Uint16(in[1:]))
				in = in[3:]
			} else {
				in = in[1:]
			}
			n = min(n, len(in))
			ts += int64(hdr>>3) * 1e6
			d.HandleFrame(pipelineLinkTypes[int(hdr&7)%len(pipelineLinkTypes)], in[:n], ts)
			in = in[n:]
		}
		d.Close()
		p.finish()
		if err := p.out.Flush(); err != nil {
			t.Fatal(err)
		}
		if p.rawErr != nil {
			t.Fatalf("-raw: %v", p.rawErr)
		}
		st := d.Stats()

		var gapBytes uint64
		for line := range strings.Lines(out.String()) {
			var rec struct {
				Type   string `json:"type"`
				Length uint64 `json:"length"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("output line %q: %v", line, err)
			}
			switch rec.Type {
			case "trade", "order":
			case "gap":
				gapBytes += rec.Length
			default:
				t.Fatalf("output line of type %q: %q", rec.Type, line)
			}
		}
		if gapBytes != st.Mirror.GapBytes {
			t.Errorf("gap lines add up to %d bytes, Stats.GapBytes is %d", gapBytes, st.Mirror.GapBytes)
		}

		if fs.open != 0 || fs.maxOpen > maxOpenRaw {
			t.Errorf("-raw: %d files left open, at most %d open at once (limit %d)", fs.open, fs.maxOpen, maxOpenRaw)
		}
		var rawBytes, rawGapBytes uint64
		for name, b := range fs.files {
			switch {
			case strings.HasSuffix(name, ".bin"):
				rawBytes += uint64(b.Len())
				if _, ok := fs.files[strings.TrimSuffix(name, ".bin")+".gaps.json"]; !ok {
					t.Errorf("-raw: %s has no .gaps.json", name)
				}
			case strings.HasSuffix(name, ".gaps.json"):
				var gaps []gap
				if err := json.Unmarshal(b.Bytes(), &gaps); err != nil || gaps == nil {
					t.Fatalf("-raw: %s holds %q: %v", name, b.String(), err)
				}
				for _, g := range gaps {
					rawGapBytes += g.Length
				}
			default:
				t.Errorf("-raw: unexpected file %s", name)
			}
		}
		if rawBytes != st.Mirror.DeliveredBytes {
			t.Errorf("-raw files hold %d bytes, Stats.DeliveredBytes is %d", rawBytes, st.Mirror.DeliveredBytes)
		}
		if rawGapBytes > st.Mirror.GapBytes {
			t.Errorf("-raw gaps add up to %d bytes, more than Stats.GapBytes %d", rawGapBytes, st.Mirror.GapBytes)
		}
	})
}

// FuzzFormat fills a trade and an order with arbitrary field values and
// formats them as mirrorfeed prints them: each JSON record is one line of
// valid JSON whose numbers and security are the record's, and each CSV row
// is one line with the header's columns.
func FuzzFormat(f *testing.F) {
	var tr sse.Trade
	var od sse.Order
	tr.TradeIndex, tr.SecurityID, tr.TradePrice, tr.TradeBSFlag, tr.HasTradeBSFlag = 7, sse.SecurityID("600000"), 10_250, 'B', true
	od.OrderIndex, od.SecurityID, od.OrderType, od.OrderBSFlag, od.OrderNO = 9, sse.SecurityID("688\x00\x00\x00"), 'A', 'S', 1<<40
	seed := func(v any) []byte { b, _ := binary.Append(nil, binary.LittleEndian, v); return b }
	f.Add(append(seed(&tr), seed(&od)...), int64(1_700_000_000_000_000_000))
	tr, od = sse.Trade{SecurityID: sse.SecurityID("\"\\\n\x7f\xff,")}, sse.Order{SecurityID: sse.SecurityID(",\x00\"\x01\\")}
	tr.TradePrice, od.Balance = -1, -1<<63
	f.Add(append(seed(&tr), seed(&od)...), int64(-1))
	columns := strings.Count(csvHeader, ",") + 1
	flow := []byte(mirror.FlowKey{SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2}, SrcPort: 1, DstPort: 2}.String())
	f.Fuzz(func(t *testing.T, data []byte, ts int64) {
		var tr sse.Trade
		var od sse.Order
		// Short data leaves the remaining fields zero; the order reuses
		// the trade's bytes after its own share.
		pad := make([]byte, binary.Size(&tr)+binary.Size(&od))
		copy(pad, data)
		if _, err := binary.Decode(pad, binary.LittleEndian, &tr); err != nil {
			t.Fatal(err)
		}
		if _, err := binary.Decode(pad[binary.Size(&tr):], binary.LittleEndian, &od); err != nil {
			t.Fatal(err)
		}
		checkJSON := func(line []byte, kind string, template int, security [6]byte, want map[string]string) {
			t.Helper()
			if bytes.IndexByte(line, '\n') != len(line)-1 {
				t.Fatalf("%s: not one line: %q", kind, line)
			}
			var rec struct {
				Type     string
				Flow     string
				TS       int64
				Template int
				Fields   map[string]json.RawMessage
			}
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatalf("%s: %q: %v", kind, line, err)
			}
			if rec.Type != kind || rec.Flow != string(flow) || rec.TS != ts || rec.Template != template {
				t.Fatalf("%s: head %+v in %q", kind, rec, line)
			}
			for name, v := range want {
				got, ok := rec.Fields[name]
				if !ok || string(got) != v {
					t.Fatalf("%s: %s is %s, want %s in %q", kind, name, got, v, line)
				}
			}
			var sec string
			if err := json.Unmarshal(rec.Fields["SecurityID"], &sec); err != nil {
				t.Fatalf("%s: SecurityID %s: %v", kind, rec.Fields["SecurityID"], err)
			}
			var wantSec []rune
			for _, c := range security {
				if c != 0 {
					wantSec = append(wantSec, rune(c))
				}
			}
			if sec != string(wantSec) {
				t.Fatalf("%s: SecurityID %q, want %q", kind, sec, string(wantSec))
			}
		}
		checkCSV := func(line []byte, kind string) {
			t.Helper()
			if bytes.IndexByte(line, '\n') != len(line)-1 {
				t.Fatalf("%s: not one line: %q", kind, line)
			}
			rec, err := csv.NewReader(bytes.NewReader(line)).Read()
			if err != nil || len(rec) != columns || rec[0] != kind {
				t.Fatalf("%s: CSV row %q: %d columns %v, want %d", kind, line, len(rec), err, columns)
			}
		}
		u := func(v uint64) string { return strconv.FormatUint(v, 10) }
		i := func(v int64) string { return strconv.FormatInt(v, 10) }
		checkJSON(appendTradeJSON(nil, flow, ts, &tr), "trade", sse.TradeTemplateID, tr.SecurityID, map[string]string{
			"TradeIndex": u(uint64(tr.TradeIndex)), "TradeChannel": u(uint64(tr.TradeChannel)), "TradeTime": u(uint64(tr.TradeTime)),
			"TradePrice": i(int64(tr.TradePrice)), "TradeQty": i(int64(tr.TradeQty)), "TradeMoney": i(int64(tr.TradeMoney)),
			"TradeBuyNo": u(tr.TradeBuyNo), "TradeSellNo": u(tr.TradeSellNo), "BizIndex": u(tr.BizIndex),
		})
		checkJSON(appendOrderJSON(nil, flow, ts, &od), "order", sse.OrderTemplateID, od.SecurityID, map[string]string{
			"OrderIndex": u(uint64(od.OrderIndex)), "OrderChannel": u(uint64(od.OrderChannel)), "OrderTime": u(uint64(od.OrderTime)),
			"OrderNO": u(od.OrderNO), "OrderPrice": i(int64(od.OrderPrice)), "Balance": i(int64(od.Balance)),
			"BizIndex": u(od.BizIndex),
		})
		checkCSV(appendTradeCSV(nil, flow, ts, &tr), "trade")
		checkCSV(appendOrderCSV(nil, flow, ts, &od), "order")
	})
}
