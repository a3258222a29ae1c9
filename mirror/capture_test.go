package mirror_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/tickwire/tickwire/internal/shareddata"
	"github.com/tickwire/tickwire/mirror"
)

// replay feeds a classic pcap file (Ethernet) to a new Assembler.
func replay(t *testing.T, path string, cfg mirror.Config) (*recorder, *mirror.Assembler) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("%s: link type %v, want Ethernet", path, r.LinkType())
	}
	rec := newRecorder(t)
	a, err := mirror.New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, ci, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = a.HandleFrame(data, ci.Timestamp.UnixNano()) // per-frame errors are counted
	}
	a.Close()
	return rec, a
}

// summary renders what the recorder saw, one line per flow direction, in
// the order the directions first appeared.
func summary(rec *recorder) string {
	var b strings.Builder
	for _, k := range rec.order {
		s := rec.streams[k]
		fmt.Fprintf(&b, "%v: %d bytes, gaps %v, ends %v\n", k, len(s.data), s.gaps, s.ends)
	}
	return b.String()
}

// captureCase is the documented result of one capture in
// ../shared/captures/SOURCES.md, as this package's semantics render it.
type captureCase struct {
	file  string
	cfg   mirror.Config
	flows map[string]flowWant // by FlowKey.String(); directions not listed deliver nothing
	stats func(mirror.Stats) string
	// conflicting: the capture has overlaps with different bytes or bad
	// checksums, so Wireshark's reassembly is not a reference.
	conflicting bool
}

type flowWant struct {
	prefix string // the delivered bytes start with this
	bytes  int    // delivered byte count
	gaps   []gapRec
	end    mirror.EndReason
}

var captureCases = []captureCase{
	{
		file: "sv_tcp-overlap-exact.pcap", cfg: mirror.Config{History: true}, conflicting: true,
		flows: map[string]flowWant{"1.1.1.1:12345->2.2.2.2:8080": {prefix: "GOOD", bytes: 4, end: mirror.EndClose}},
		stats: func(s mirror.Stats) string {
			return expect(s.Duplicates == 1 && s.OverlapAnomalies == 1, "one duplicate with different bytes")
		},
	},
	{
		file: "sv_tcp-overlap-partial.pcap", cfg: mirror.Config{History: true}, conflicting: true,
		flows: map[string]flowWant{"1.1.1.1:12345->2.2.2.2:8080": {prefix: "GOOD", bytes: 4, end: mirror.EndClose}},
		stats: func(s mirror.Stats) string {
			return expect(s.Duplicates == 1 && s.OverlapAnomalies == 1, "one duplicate with different bytes")
		},
	},
	{
		file:  "sv_tcp-simple-gap.pcap",
		flows: map[string]flowWant{"1.1.1.1:12345->2.2.2.2:8080": {prefix: "VERY", bytes: 8, gaps: []gapRec{{4, 4}}, end: mirror.EndClose}},
	},
	{
		file:  "sv_tcp-leading-gap.pcap",
		flows: map[string]flowWant{"1.1.1.1:12345->2.2.2.2:8080": {bytes: 8, gaps: []gapRec{{0, 4}}, end: mirror.EndClose}},
	},
	{
		file:  "sv_midstream.pcap",
		flows: map[string]flowWant{"82.165.177.154:80->10.16.1.11:54186": {prefix: "HTTP/1.1 200 OK", bytes: 259, end: mirror.EndFIN}},
	},
	{
		file: "sv_dns-tcp-ts-gap.pcap",
		flows: map[string]flowWant{
			"10.16.1.11:46574->8.8.8.8:53": {bytes: 68, gaps: []gapRec{{34, 34}}, end: mirror.EndFIN},
			"8.8.8.8:53->10.16.1.11:46574": {bytes: 678, end: mirror.EndFIN},
		},
	},
	{
		file:  "sv_split-handshake-4whs.pcap",
		flows: map[string]flowWant{"1.1.1.1:12345->2.2.2.2:80": {bytes: 4, end: mirror.EndRST}},
	},
	{file: "zeek_fin_retransmission.pcap"},
	{
		file: "zeek_handshake-reorder.pcap",
		flows: map[string]flowWant{
			"141.142.228.5:59856->192.150.187.43:80": {prefix: "GET ", bytes: 136, end: mirror.EndFIN},
			"192.150.187.43:80->141.142.228.5:59856": {prefix: "HTTP/1.1 ", bytes: 3*1448 + 663, end: mirror.EndFIN},
		},
	},
	{
		// The server's data is missing but ACKed; nothing of it was
		// delivered, so there is no gap (gaps lie before delivered bytes).
		file:  "zeek_miss_end_data.pcap",
		flows: map[string]flowWant{"192.168.122.230:60648->77.238.160.184:80": {prefix: "GET ", bytes: 538, end: mirror.EndFIN}},
	},
	{
		file: "zeek_missing-syn.pcap",
		flows: map[string]flowWant{
			"141.42.64.125:56730->125.190.109.199:80": {prefix: "GET / HTTP/1.0", bytes: 98, end: mirror.EndFIN},
			"125.190.109.199:80->141.42.64.125:56730": {prefix: "HTTP/1.1 200 OK", bytes: 6*1448 + 729, end: mirror.EndFIN},
		},
	},
	{
		// Captured on the server: its segments carry offloaded checksums.
		file: "zeek_ssh-dups.pcap",
		flows: map[string]flowWant{
			"192.168.0.102:53206->192.168.0.112:22": {prefix: "SSH-", bytes: 3705, end: mirror.EndFIN},
			"192.168.0.112:22->192.168.0.102:53206": {prefix: "SSH-", bytes: 4273, end: mirror.EndFIN},
		},
		stats: func(s mirror.Stats) string {
			return expect(s.Duplicates >= 150 && s.OffloadedDirections == 1 && s.ChecksumOffloaded > 100 && s.ChecksumBad == 0,
				"150+ duplicates, one checksum-offloaded direction, nothing dropped")
		},
	},
	{
		file:  "zeek_no-handshake.pcap",
		flows: map[string]flowWant{"141.142.228.5:59856->192.150.187.43:80": {prefix: "GET ", bytes: 136, end: mirror.EndClose}},
	},
}

func TestCaptures(t *testing.T) {
	for _, c := range captureCases {
		t.Run(c.file, func(t *testing.T) {
			path := shareddata.Path(t, "captures", c.file)
			rec, a := replay(t, path, c.cfg)
			for _, k := range rec.order {
				s := rec.streams[k]
				want, listed := c.flows[k.String()]
				if !listed {
					if len(s.data) != 0 || len(s.gaps) != 0 {
						t.Errorf("%v: delivered %d bytes and %d gaps, want nothing", k, len(s.data), len(s.gaps))
					}
					continue
				}
				if len(s.data) != want.bytes || !bytes.HasPrefix(s.data, []byte(want.prefix)) {
					t.Errorf("%v: delivered %d bytes %.20q, want %d starting %q", k, len(s.data), s.data, want.bytes, want.prefix)
				}
				if fmt.Sprint(s.gaps) != fmt.Sprint(want.gaps) {
					t.Errorf("%v: gaps %v, want %v", k, s.gaps, want.gaps)
				}
				if len(s.ends) != 1 || s.ends[0] != want.end {
					t.Errorf("%v: ends %v, want [%v]", k, s.ends, want.end)
				}
			}
			for k := range c.flows {
				found := false
				for _, got := range rec.order {
					found = found || got.String() == k
				}
				if !found {
					t.Errorf("direction %s never started", k)
				}
			}
			if c.stats != nil {
				if msg := c.stats(a.Stats()); msg != "" {
					t.Errorf("stats: want %s; got %+v", msg, a.Stats())
				}
			}
			if t.Failed() {
				t.Logf("got:\n%s", summary(rec))
			}
		})
	}
}

// TestEveryCaptureIsCovered fails when ../shared/captures gains a file that
// no test here describes.
func TestEveryCaptureIsCovered(t *testing.T) {
	dir := shareddata.Path(t, "captures")
	files, err := filepath.Glob(filepath.Join(dir, "*.pcap*"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{"zeek_reassembly.pcap": true} // TestCaptureZeekReassembly
	for _, c := range captureCases {
		covered[c.file] = true
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no documented expectation in capture_test.go", filepath.Base(f))
		}
	}
	if len(files) < len(covered) {
		t.Errorf("found %d captures, the tests know %d", len(files), len(covered))
	}
}

// TestCapturesMatchWireshark compares every direction's delivered bytes and
// gaps with Wireshark's own reassembly (tshark -qz follow,tcp,raw,N) for
// every capture whose overlaps do not conflict.
func TestCapturesMatchWireshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed; skipping the comparison with Wireshark's reassembly")
	}
	for _, c := range captureCases {
		if c.conflicting {
			continue
		}
		t.Run(c.file, func(t *testing.T) {
			t.Parallel() // tshark is slow to start
			path := shareddata.Path(t, "captures", c.file)
			rec, _ := replay(t, path, c.cfg)
			want := wiresharkStreams(t, tshark, path)
			var keys []string
			for k := range want {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				w := want[k]
				var got *stream
				for key, s := range rec.streams {
					if key.String() == k {
						got = s
					}
				}
				if got == nil {
					if len(w.img) != 0 {
						t.Errorf("%s: Wireshark has %d bytes, mirror delivered nothing", k, len(w.img))
					}
					continue
				}
				if !bytes.Equal(got.img, w.img) || fmt.Sprint(got.delivered) != fmt.Sprint(w.delivered) {
					t.Errorf("%s: mirror %d bytes (gaps %v), Wireshark %d bytes (gaps %v)", k, len(got.img), got.gaps, len(w.img), w.gaps)
				}
			}
			for key, s := range rec.streams {
				if _, ok := want[key.String()]; !ok && len(s.img) != 0 {
					t.Errorf("%v: mirror delivered %d bytes, Wireshark nothing", key, len(s.img))
				}
			}
		})
	}
}

var missingRE = regexp.MustCompile(`^\[(\d+) bytes missing in capture file\]\x00?$`)

// wiresharkStreams runs tshark's raw follow on every TCP stream of the file
// and returns, per direction, the stream image with gaps zeroed.
func wiresharkStreams(t *testing.T, tshark, path string) map[string]*stream {
	t.Helper()
	out, err := exec.Command(tshark, "-r", path, "-T", "fields", "-e", "tcp.stream").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	ids := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		ids[l] = true
	}
	// One tshark run follows every stream: sections come one after another.
	args := []string{"-r", path, "-q"}
	for id := range ids {
		args = append(args, "-z", "follow,tcp,raw,"+id)
	}
	out, err = exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark follow: %v", err)
	}
	res := map[string]*stream{}
	var node [2]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Follow: "):
			node = [2]string{}
			continue
		case strings.HasPrefix(line, "Node 0: "):
			node[0] = strings.TrimPrefix(line, "Node 0: ")
			continue
		case strings.HasPrefix(line, "Node 1: "):
			node[1] = strings.TrimPrefix(line, "Node 1: ")
			continue
		}
		dir := 0
		if strings.HasPrefix(line, "\t") {
			dir = 1
		}
		b, err := hex.DecodeString(strings.TrimSpace(line))
		if err != nil || len(b) == 0 || node[1] == "" {
			continue
		}
		k := node[dir] + "->" + node[1-dir]
		s := res[k]
		if s == nil {
			s = &stream{}
			res[k] = s
		}
		if m := missingRE.FindSubmatch(b); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			s.gaps = append(s.gaps, gapRec{uint64(len(s.img)), uint64(n)})
			s.img = append(s.img, make([]byte, n)...)
			s.delivered = append(s.delivered, make([]bool, n)...)
			continue
		}
		s.img = append(s.img, b...)
		for range b {
			s.delivered = append(s.delivered, true)
		}
	}
	return res
}

// TestCaptureZeekReassembly checks the evasion capture: 117 packets of one
// HTTP flow in which most full-size segments carry a bad TCP checksum (10) or
// an IPv4 length beyond the frame (5), with retransmissions, lost segments
// and retransmissions whose content differs. The receiver dropped the bad
// ones, so does the Assembler: their bytes become gaps unless a good copy
// arrives; the counters say why.
func TestCaptureZeekReassembly(t *testing.T) {
	path := shareddata.Path(t, "captures", "zeek_reassembly.pcap")
	client := "63.193.213.194:2564->128.3.97.175:80"
	for _, c := range []struct {
		name               string
		cfg                mirror.Config
		delivered, gapped  uint64
		wantAnomalies      bool
		badCsum, truncated uint64
	}{
		// The retransmissions come seconds later (a WAN trace): with the
		// default HoleTimeout their holes were already skipped.
		{"default", mirror.Config{History: true}, 10856, 22352, false, 10, 5},
		{"no timeout", mirror.Config{History: true, HoleTimeout: -1}, 12364, 20844, false, 10, 5},
		// Accepting the corrupt copies shows the differing retransmissions.
		{"checksums ignored", mirror.Config{History: true, HoleTimeout: -1, Checksum: mirror.ChecksumIgnore}, 0, 0, true, 0, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, a := replay(t, path, c.cfg)
			st := a.Stats()
			var s *stream
			for k, v := range rec.streams {
				if k.String() == client {
					s = v
				}
			}
			if s == nil {
				t.Fatalf("no client direction:\n%s", summary(rec))
			}
			if st.Frames != 117 || st.ChecksumBad != c.badCsum || st.Truncated != c.truncated || st.Duplicates == 0 {
				t.Errorf("stats %+v", st)
			}
			if c.delivered != 0 && (st.DeliveredBytes != c.delivered || st.GapBytes != c.gapped) {
				t.Errorf("delivered %d bytes and %d gap bytes, want %d and %d", st.DeliveredBytes, st.GapBytes, c.delivered, c.gapped)
			}
			// The client's last byte is at sequence 33134+75 (ISN 0).
			if got := st.DeliveredBytes + st.GapBytes; got != 33208 || uint64(len(s.img)) != got {
				t.Errorf("delivered + gaps = %d (image %d), want the whole stream, 33208", got, len(s.img))
			}
			if (st.OverlapAnomalies > 0) != c.wantAnomalies {
				t.Errorf("OverlapAnomalies %d", st.OverlapAnomalies)
			}
			if t.Failed() {
				t.Logf("\n%s", summary(rec))
			}
		})
	}
}

// TestCaptureOffloadedDirection: the SSH capture was taken on the server,
// whose segments carry unfilled (offloaded) TCP checksums. Auto lists that
// direction and keeps its bytes; verify drops them.
func TestCaptureOffloadedDirection(t *testing.T) {
	path := shareddata.Path(t, "captures", "zeek_ssh-dups.pcap")
	_, auto := replay(t, path, mirror.Config{})
	off := auto.OffloadedFlows()
	if len(off) != 1 || off[0].String() != "192.168.0.112:22->192.168.0.102:53206" {
		t.Fatalf("OffloadedFlows() = %v, want the server's direction", off)
	}
	rec, verify := replay(t, path, mirror.Config{Checksum: mirror.ChecksumVerify})
	st := verify.Stats()
	if st.ChecksumBad != auto.Stats().ChecksumOffloaded || st.OffloadedDirections != 0 || len(verify.OffloadedFlows()) != 0 {
		t.Fatalf("verify: %+v", st)
	}
	for k, s := range rec.streams {
		if k == off[0] && len(s.data) != 0 {
			t.Fatalf("verify delivered %d bytes of the offloaded direction", len(s.data))
		}
	}
}
