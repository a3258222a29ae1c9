package mirror_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/internal/captest"
	"github.com/tickwire/tickwire/internal/shareddata"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/mirror"
)

// convertedLinkTypes are the link types an Ethernet frame is rewritten to.
var convertedLinkTypes = []uint16{frame.LinkTypeLinuxSLL, frame.LinkTypeLinuxSLL2, frame.LinkTypeRaw, frame.LinkTypeIPv4}

// transcript renders every Handler call the recorder saw, flow by flow in
// the order the flows appeared.
func transcript(rec *recorder) string {
	var b strings.Builder
	for _, k := range rec.order {
		fmt.Fprintf(&b, "%v:\n", k)
		for _, e := range rec.streams[k].events {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

// linkFrame is one captured frame with its link type.
type linkFrame struct {
	link uint16
	data []byte
	ts   int64
}

// feedLink runs frames through a new Assembler with HandleLinkFrame and
// returns the Handler calls, the counters and the per-frame errors.
func feedLink(t *testing.T, cfg mirror.Config, frames []linkFrame) (*recorder, mirror.Stats, []error) {
	t.Helper()
	rec := newRecorder(t)
	a, err := mirror.New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, f := range frames {
		errs = append(errs, a.HandleLinkFrame(f.link, f.data, f.ts))
	}
	a.Close()
	return rec, a.Stats(), errs
}

// checkSameAsEthernet converts the Ethernet frames to every link type and
// checks that the Assembler makes the same Handler calls and counts the
// same as from the originals, less the counts of the frames the link type
// cannot carry (which the Ethernet path ignores or drops without a state
// change).
func checkSameAsEthernet(t *testing.T, name string, cfg mirror.Config, eth []linkFrame) {
	t.Helper()
	wantRec, wantStats, wantErrs := feedLink(t, cfg, eth)
	want := transcript(wantRec)
	for _, link := range convertedLinkTypes {
		var conv []linkFrame
		var convErrs []error
		expect := wantStats
		for i, f := range eth {
			data, ok := captest.FromEthernet(f.data, link)
			if !ok {
				// What the Ethernet path counted for this frame, alone.
				_, st, _ := feedLink(t, cfg, []linkFrame{f})
				expect.Frames -= st.Frames
				expect.NonTCP -= st.NonTCP
				expect.Malformed -= st.Malformed
				if st.Frames != 1 || st.NonTCP+st.Malformed != 1 {
					t.Fatalf("%s: frame %d cannot be converted to link type %d but counts %+v", name, i, link, st)
				}
				continue
			}
			conv = append(conv, linkFrame{link: link, data: data, ts: f.ts})
			convErrs = append(convErrs, wantErrs[i])
		}
		rec, st, errs := feedLink(t, cfg, conv)
		if got := transcript(rec); got != want {
			t.Errorf("%s as link type %d (%s): Handler calls differ from Ethernet's\n got:\n%s\nwant:\n%s", name, link, frame.LinkTypeName(link), got, want)
		}
		if st != expect {
			t.Errorf("%s as link type %d: stats\n got %+v\nwant %+v", name, link, st, expect)
		}
		for i := range errs {
			if errs[i] != convErrs[i] {
				t.Errorf("%s as link type %d: frame %d: error %v, Ethernet %v", name, link, i, errs[i], convErrs[i])
				break
			}
		}
	}
}

// TestLinkTypesSameAsEthernet: segments that take every path (straight,
// in order, out of order, VLAN-tagged, fragments, bad checksums, truncated,
// short frames, ARP) give the same streams and counters in every link type.
func TestLinkTypesSameAsEthernet(t *testing.T) {
	var frames []linkFrame
	add := func(eth []byte) {
		frames = append(frames, linkFrame{link: frame.LinkTypeEthernet, data: eth, ts: int64(len(frames)) * 1000})
	}
	add(ethernet(appendIPv4(nil, ab(999, fSYN, ""))))
	add(ethernet(appendIPv4(nil, ba(4999, fSYN, ""))))
	add(ethernet(appendIPv4(nil, ab(1000, fPSH, "hello "))))
	add(ethernet(appendIPv4(nil, ab(1012, fPSH, "held"))))         // out of order
	add(ethernet(appendIPv4(nil, ab(1006, fPSH, "world ")), 7))    // one VLAN tag
	add(ethernet(appendIPv4(nil, ab(1016, fPSH, "tagged")), 7, 8)) // two
	add(ethernet(appendIPv4(nil, ab(1022, fPSH, "third")), 1, 2, 3))
	bad := ab(1022, fPSH, "corrupt")
	bad.cs = csBad
	add(ethernet(appendIPv4(nil, bad)))
	frag := ab(1022, fPSH, "fragment")
	frag.fragMF = true
	add(ethernet(appendIPv4(nil, frag)))
	add(ethernet(appendIPv4(nil, ab(1022, fPSH, "after")))[:40]) // cut by the capture
	add(ethernet(appendIPv4(nil, ba(5000, fPSH, "reply"))))
	add([]byte{1, 2, 3})                                       // shorter than a link header
	add(append(ethernet(nil)[:12], 0x08, 0x06, 0, 1, 8))       // ARP
	add(append(ethernet(nil)[:12], 0x86, 0xdd, 0x60, 0, 0, 0)) // IPv6
	add(ethernet(appendIPv4(nil, ab(1022, fPSH, "end")))[:20]) // short IPv4 header
	add(ethernet(appendIPv4(nil, ab(1022, fFIN|fPSH, "fin"))))
	for _, cs := range []mirror.ChecksumMode{mirror.ChecksumAuto, mirror.ChecksumIgnore} {
		for _, history := range []bool{false, true} {
			checkSameAsEthernet(t, fmt.Sprintf("segments (%v, history %v)", cs, history), mirror.Config{Checksum: cs, History: history}, frames)
		}
	}
}

// TestHandleLinkFrameHeaders checks each link type's header handling on
// its own: short headers, other protocols, raw IP versions, and a link type
// that is not decoded.
func TestHandleLinkFrameHeaders(t *testing.T) {
	ip := appendIPv4(nil, ab(1000, fPSH, "x"))
	for _, c := range []struct {
		name  string
		link  uint16
		data  []byte
		err   error
		count func(mirror.Stats) uint64
	}{
		{"sll short", frame.LinkTypeLinuxSLL, make([]byte, 15), mirror.ErrShortFrame, func(s mirror.Stats) uint64 { return s.Malformed }},
		{"sll2 short", frame.LinkTypeLinuxSLL2, make([]byte, 19), mirror.ErrShortFrame, func(s mirror.Stats) uint64 { return s.Malformed }},
		{"sll arp", frame.LinkTypeLinuxSLL, append(make([]byte, 14), 0x08, 0x06, 0, 1), nil, func(s mirror.Stats) uint64 { return s.NonTCP }},
		{"sll2 ipv6", frame.LinkTypeLinuxSLL2, append([]byte{0x86, 0xdd}, make([]byte, 60)...), nil, func(s mirror.Stats) uint64 { return s.NonTCP }},
		{"raw ipv6", frame.LinkTypeRaw, append([]byte{0x60}, make([]byte, 59)...), nil, func(s mirror.Stats) uint64 { return s.NonTCP }},
		{"raw version 5", frame.LinkTypeRaw, append([]byte{0x55}, ip[1:]...), mirror.ErrIPv4Header, func(s mirror.Stats) uint64 { return s.Malformed }},
		{"raw empty", frame.LinkTypeRaw, nil, mirror.ErrIPv4Header, func(s mirror.Stats) uint64 { return s.Malformed }},
		{"ipv4 ipv6", frame.LinkTypeIPv4, append([]byte{0x60}, make([]byte, 59)...), mirror.ErrIPv4Header, func(s mirror.Stats) uint64 { return s.Malformed }},
		{"802.11", 105, ethernet(ip), mirror.ErrLinkType, func(s mirror.Stats) uint64 { return s.UnsupportedLink }},
		{"null is ethernet", 0, ethernet(ip), nil, func(s mirror.Stats) uint64 { return s.Segments }},
		{"raw ipv4", frame.LinkTypeRaw, ip, nil, func(s mirror.Stats) uint64 { return s.Segments }},
	} {
		a, err := mirror.New(mirror.Config{}, newRecorder(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.HandleLinkFrame(c.link, c.data, 1); err != c.err {
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
		}
		if st := a.Stats(); st.Frames != 1 || c.count(st) != 1 {
			t.Errorf("%s: stats %+v", c.name, st)
		}
	}
}

// TestSharedCapturesAllLinkTypes converts every capture in ../shared to
// each link type, writes it with link/pcap's Writer (and, with tshark
// installed, checks that tshark reads the same IPv4 TCP headers from it as
// from the original), reads it back with link/pcap's Reader and checks that
// the Assembler delivers the same bytes and gaps and counts the same as
// from the Ethernet original.
func TestSharedCapturesAllLinkTypes(t *testing.T) {
	dir := shareddata.Path(t, "captures")
	files, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if len(files) == 0 {
		t.Skip("no captures in ../shared/captures")
	}
	tshark, _ := exec.LookPath("tshark")
	if tshark == "" {
		t.Log("tshark not installed: the converted files are not checked with it")
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			t.Parallel() // tshark takes most of the time
			checkCaptureAllLinkTypes(t, tshark, path)
		})
	}
}

// checkCaptureAllLinkTypes is TestSharedCapturesAllLinkTypes for one capture.
func checkCaptureAllLinkTypes(t *testing.T, tshark, path string) {
	name := filepath.Base(path)
	eth := readLinkFrames(t, path)
	for _, f := range eth {
		if f.link != frame.LinkTypeEthernet {
			t.Fatalf("%s: link type %d", name, f.link)
		}
	}
	wantTCP := ""
	if tshark != "" {
		if wantTCP = tsharkTCP(t, tshark, path); wantTCP == "" {
			t.Fatalf("tshark reads no IPv4 TCP segment in %s", name)
		}
	}
	for _, link := range convertedLinkTypes {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("%s.%s.pcap", name, frame.LinkTypeName(link)))
		fh, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pcap.NewWriter(fh, layers.LinkType(link), pcap.MaxRecordLen)
		if err != nil {
			t.Fatal(err)
		}
		var conv []linkFrame
		for _, f := range eth {
			if data, ok := captest.FromEthernet(f.data, link); ok {
				conv = append(conv, linkFrame{link: link, data: data, ts: f.ts})
				if err := w.WriteFrame(f.ts, data, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if tshark != "" {
			if got := tsharkTCP(t, tshark, out); got != wantTCP {
				t.Errorf("%s as %s: tshark reads other TCP headers\n got %q\nwant %q", name, frame.LinkTypeName(link), got, wantTCP)
			}
		}
		// The file holds the frames that checkSameAsEthernet feeds.
		back := readLinkFrames(t, out)
		if len(back) != len(conv) {
			t.Fatalf("%s: read %d frames, wrote %d", out, len(back), len(conv))
		}
		for i, f := range back {
			if f.link != link || f.ts != conv[i].ts || !bytes.Equal(f.data, conv[i].data) {
				t.Fatalf("%s: frame %d read back differs (link type %d, wrote %d)", out, i, f.link, link)
			}
		}
	}
	for _, cfg := range []mirror.Config{{}, {Checksum: mirror.ChecksumIgnore, History: true}} {
		checkSameAsEthernet(t, name, cfg, eth)
	}
}

// readLinkFrames reads a capture with link/pcap's Reader.
func readLinkFrames(t *testing.T, path string) []linkFrame {
	t.Helper()
	frames, err := readFrames(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return frames
}

// readFrames reads every frame of the capture at path, with its link type:
// all of them and nil, or those before the error.
func readFrames(path string) ([]linkFrame, error) {
	r, err := pcap.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	batch := frame.NewBatch(8, pcap.MaxRecordLen)
	var out []linkFrame
	for {
		n, err := r.ReadFrames(batch)
		for _, f := range batch[:n] {
			out = append(out, linkFrame{link: f.LinkType, data: bytes.Clone(f.Data()), ts: f.Time})
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// tsharkTCP is tshark's reading of the IPv4 TCP headers of a capture.
func tsharkTCP(t *testing.T, tshark, path string) string {
	t.Helper()
	cmd := exec.Command(tshark, "-n", "-r", path, "-Y", "ip && tcp", "-T", "fields",
		"-e", "ip.src", "-e", "ip.dst", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.seq_raw", "-e", "tcp.len", "-e", "tcp.flags")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v: %s", path, err, stderr.Bytes())
	}
	return string(out)
}
