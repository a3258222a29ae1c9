package pcap

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/tickwire/tickwire/link/frame"
)

// testFrame is one record of a hand-made capture.
type testFrame struct {
	ts      int64 // ns since the epoch; multiples of 1000 survive microsecond files
	data    []byte
	wireLen int
	link    uint16 // Frame.LinkType; 0 in a want list means Ethernet
}

// makeFrames returns n frames of varied sizes and contents, with
// microsecond-exact timestamps so every variant can store them.
func makeFrames(n int) []testFrame {
	out := make([]testFrame, n)
	base := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC).UnixNano()
	for i := range out {
		data := make([]byte, 14+i*37%1500)
		for j := range data {
			data[j] = byte(i*7 + j)
		}
		out[i] = testFrame{ts: base + int64(i)*1234567000, data: data, wireLen: len(data)}
	}
	return out
}

// encodeClassic writes a classic pcap file by hand, in the byte order and
// timestamp resolution asked for, so the reader is checked against bytes
// this test controls rather than against another reader's writer.
func encodeClassic(frames []testFrame, order binary.ByteOrder, nano bool) []byte {
	var b bytes.Buffer
	h := make([]byte, 24)
	magic := uint32(magicMicro)
	if nano {
		magic = magicNano
	}
	order.PutUint32(h[0:], magic)
	order.PutUint16(h[4:], 2)
	order.PutUint16(h[6:], 4)
	order.PutUint32(h[16:], 65535)
	order.PutUint32(h[20:], uint32(layers.LinkTypeEthernet))
	b.Write(h)
	for _, f := range frames {
		r := make([]byte, 16)
		frac := f.ts % 1e9
		if !nano {
			frac /= 1000
		}
		order.PutUint32(r[0:], uint32(f.ts/1e9))
		order.PutUint32(r[4:], uint32(frac))
		order.PutUint32(r[8:], uint32(len(f.data)))
		order.PutUint32(r[12:], uint32(f.wireLen))
		b.Write(r)
		b.Write(f.data)
	}
	return b.Bytes()
}

func encodeNG(t testing.TB, frames []testFrame) []byte {
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriter(&b, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, f.ts), CaptureLength: len(f.data), Length: f.wireLen}
		if err := w.WritePacket(ci, f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAll reads every frame with a small batch so batch boundaries are
// crossed, and returns copies.
func readAll(t testing.TB, r *Reader, slot int) ([]testFrame, error) {
	t.Helper()
	batch := frame.NewBatch(3, slot)
	var out []testFrame
	for {
		n, err := r.ReadFrames(batch)
		for _, f := range batch[:n] {
			out = append(out, testFrame{ts: f.Time, data: append([]byte(nil), f.Data()...), wireLen: f.WireLen, link: f.LinkType})
		}
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
	}
}

func checkSame(t *testing.T, got, want []testFrame) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		link := want[i].link
		if link == 0 {
			link = frame.LinkTypeEthernet
		}
		if got[i].ts != want[i].ts || got[i].wireLen != want[i].wireLen || !bytes.Equal(got[i].data, want[i].data) || got[i].link != link {
			t.Fatalf("frame %d: ts %d len %d wire %d link %d, want ts %d len %d wire %d link %d",
				i, got[i].ts, len(got[i].data), got[i].wireLen, got[i].link, want[i].ts, len(want[i].data), want[i].wireLen, link)
		}
	}
}

func TestReaderAllFormats(t *testing.T) {
	want := makeFrames(20)
	ngWant := append([]testFrame(nil), want...)
	cases := []struct {
		name   string
		file   []byte
		format Format
		big    bool
	}{
		{"le-micro", encodeClassic(want, binary.LittleEndian, false), FormatPcap, false},
		{"be-micro", encodeClassic(want, binary.BigEndian, false), FormatPcap, true},
		{"le-nano", encodeClassic(want, binary.LittleEndian, true), FormatPcapNano, false},
		{"be-nano", encodeClassic(want, binary.BigEndian, true), FormatPcapNano, true},
		{"pcapng", encodeNG(t, ngWant), FormatPcapNG, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(c.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Format() != c.format || r.BigEndian() != c.big || r.LinkType() != layers.LinkTypeEthernet {
				t.Fatalf("format %v big %v link %v, want %v %v Ethernet", r.Format(), r.BigEndian(), r.LinkType(), c.format, c.big)
			}
			got, err := readAll(t, r, 2048)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, got, want)
			if st := r.Stats(); st.Frames != int64(len(want)) || st.Truncated != 0 {
				t.Fatalf("stats %+v", st)
			}
			// After io.EOF the reader keeps saying io.EOF.
			if n, err := r.ReadFrames(frame.NewBatch(1, 64)); n != 0 || err != io.EOF {
				t.Fatalf("after end: %d %v", n, err)
			}
		})
	}
}

func TestReaderGzip(t *testing.T) {
	want := makeFrames(5)
	for name, file := range map[string][]byte{
		"pcap":   encodeClassic(want, binary.BigEndian, true),
		"pcapng": encodeNG(t, want),
	} {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(file)
		zw.Close()
		r, err := NewReader(&z)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := readAll(t, r, 2048)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkSame(t, got, want)
	}
}

func TestReaderSlotTruncates(t *testing.T) {
	want := makeFrames(6)
	r, err := NewReader(bytes.NewReader(encodeClassic(want, binary.LittleEndian, true)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r, 100)
	if err != nil {
		t.Fatal(err)
	}
	var truncated int64
	for i, f := range got {
		if f.wireLen != len(want[i].data) || !bytes.Equal(f.data, want[i].data[:min(100, len(want[i].data))]) {
			t.Fatalf("frame %d wrong after truncation", i)
		}
		if f.wireLen > len(f.data) {
			truncated++
		}
	}
	if truncated == 0 || r.Stats().Truncated != truncated {
		t.Fatalf("truncated %d, stats %+v", truncated, r.Stats())
	}
}

func TestReaderTruncatedFileNamesRecord(t *testing.T) {
	want := makeFrames(4)
	files := map[string][]byte{
		"pcap":   encodeClassic(want, binary.LittleEndian, false),
		"pcapng": encodeNG(t, want),
	}
	for name, file := range files {
		// Every prefix of the file: a cut inside a record must name it.
		for cut := len(file) - 1; cut > 24; cut-- {
			r, err := NewReader(bytes.NewReader(file[:cut]))
			if err != nil {
				var he *HeaderError
				if !errors.As(err, &he) {
					t.Fatalf("%s cut %d: header error %T %v", name, cut, err, err)
				}
				continue
			}
			got, err := readAll(t, r, 2048)
			if err == nil {
				// The cut fell exactly between records.
				if len(got) >= len(want) {
					t.Fatalf("%s cut %d: all %d frames read from a truncated file", name, cut, len(got))
				}
				continue
			}
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("%s cut %d: error %T %v, want *RecordError", name, cut, err, err)
			}
			if re.Record != int64(len(got))+1 {
				t.Fatalf("%s cut %d: record %d after %d good frames", name, cut, re.Record, len(got))
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%s cut %d: %v, want unexpected EOF", name, cut, err)
			}
			// Sticky.
			if _, err2 := r.ReadFrames(frame.NewBatch(1, 64)); err2 != err {
				t.Fatalf("%s: error not sticky: %v then %v", name, err, err2)
			}
		}
	}
}

func TestReaderCorruptRecordLength(t *testing.T) {
	want := makeFrames(3)
	file := encodeClassic(want, binary.LittleEndian, true)
	// Third record's caplen: header 24, then two records.
	off := 24 + 16 + len(want[0].data) + 16 + len(want[1].data)
	binary.LittleEndian.PutUint32(file[off+8:], 0xfffffff0)
	binary.LittleEndian.PutUint32(file[off+12:], 0xfffffff0)
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r, 2048)
	var re *RecordError
	if !errors.As(err, &re) || re.Record != 3 || len(got) != 2 {
		t.Fatalf("got %d frames, err %v; want 2 frames then record 3 error", len(got), err)
	}
	t.Logf("corrupt length: %v", err)
}

func TestReaderBadHeaders(t *testing.T) {
	cases := map[string][]byte{
		"empty":      {},
		"short":      {0xd4, 0xc3},
		"magic":      []byte("GIF89a and some more bytes to fill the header up"),
		"half pcap":  encodeClassic(nil, binary.LittleEndian, false)[:12],
		"bad gzip":   {0x1f, 0x8b, 0, 0},
		"ng no body": {0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0},
	}
	for name, file := range cases {
		_, err := NewReader(bytes.NewReader(file))
		var he *HeaderError
		if !errors.As(err, &he) {
			t.Errorf("%s: err %T %v, want *HeaderError", name, err, err)
		}
	}
	_, err := NewReader(bytes.NewReader(cases["magic"]))
	if !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("unknown magic: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "absent.pcap")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
}

func TestReaderDoesNotAllocate(t *testing.T) {
	frames := makeFrames(8)
	for name, file := range map[string][]byte{
		"pcap":   encodeClassic(frames, binary.LittleEndian, true),
		"pcapng": encodeNG(t, frames),
	} {
		// One file with many records, read in a loop of batches.
		var many []testFrame
		for range 200 {
			many = append(many, frames...)
		}
		if name == "pcap" {
			file = encodeClassic(many, binary.LittleEndian, true)
		} else {
			file = encodeNG(t, many)
		}
		r, err := NewReader(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		batch := frame.NewBatch(4, 2048)
		r.ReadFrames(batch) // warm the reader's buffer
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := r.ReadFrames(batch); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per ReadFrames, want 0", name, allocs)
		}
	}
}

func TestWriterRoundTrip(t *testing.T) {
	want := makeFrames(10)
	want[3].ts += 789 // nanoseconds survive
	want[4].wireLen = len(want[4].data) + 100
	path := filepath.Join(t.TempDir(), "w.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, layers.LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range want {
		if err := w.WriteFrame(fr.ts, fr.data, fr.wireLen); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() { w.WriteFrame(1, want[0].data, 0) })
	if allocs != 0 {
		t.Errorf("WriteFrame: %v allocations, want 0", allocs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(0, nil, 0); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("write after close: %v", err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := readAll(t, r, 4096)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got[:len(want)], want)
	if len(got) != len(want)+101 {
		t.Fatalf("read %d frames, want %d", len(got), len(want)+101)
	}
	// gopacket reads it too.
	f2, _ := os.Open(path)
	defer f2.Close()
	pr, err := pcapgo.NewReader(f2)
	if err != nil || pr.Resolution() != gopacket.TimestampResolutionNanosecond {
		t.Fatalf("pcapgo: %v %v", err, pr)
	}
	// And tshark, when installed: every record, nanosecond times intact.
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Log("tshark not installed; skipping the tshark check")
		return
	}
	out, err := exec.Command("tshark", "-r", path, "-T", "fields", "-e", "frame.time_epoch").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v", err)
	}
	times := strings.Fields(string(out))
	if len(times) != len(got) || !strings.HasSuffix(times[3], "789") {
		t.Fatalf("tshark read %d records (want %d), fourth at %v", len(times), len(got), times[3])
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestWriterErrorsAreReturned(t *testing.T) {
	w, err := NewWriter(&failingWriter{n: 0}, layers.LinkTypeEthernet, 128)
	if err != nil {
		t.Fatal(err) // the header is buffered
	}
	big := make([]byte, 128)
	var werr error
	for i := 0; i < 2000 && werr == nil; i++ {
		werr = w.WriteFrame(int64(i), big, 0)
	}
	if werr == nil {
		werr = w.Flush()
	}
	if werr == nil || w.Flush() == nil {
		t.Fatal("write errors not reported")
	}
}
