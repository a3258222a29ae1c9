package mirror_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/mirror"
)

func (s seg) at(ts time.Duration) seg { s.ts = int64(ts); return s }
func (s seg) withCS(cs int) seg       { s.cs = cs; return s }

// flushAt is a pseudo-segment that calls Flush instead of handing a packet.
func flushAt(ts time.Duration) seg { return seg{flags: 0xff, ts: int64(ts)} }

type seqCase struct {
	name  string
	cfg   mirror.Config
	segs  []seg
	open  bool                // do not Close at the end
	want  []string            // events of keyAB
	other map[string][]string // events of other directions, by FlowKey.String()
	stats func(st mirror.Stats) string
}

func runSeqCase(t *testing.T, c seqCase) (*recorder, *mirror.Assembler) {
	t.Helper()
	rec := newRecorder(t)
	a, err := mirror.New(c.cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range c.segs {
		if s.flags == 0xff {
			a.Flush(s.ts)
			continue
		}
		if err := a.HandleIPv4(appendIPv4(nil, s), s.ts); err != nil && s.cs == csGood {
			t.Fatalf("segment %d: %v", i, err)
		}
	}
	if !c.open {
		a.Close()
	}
	return rec, a
}

func eventsOf(rec *recorder, k mirror.FlowKey) []string {
	if s := rec.streams[k]; s != nil {
		return s.events
	}
	return nil
}

func TestSegmentSequences(t *testing.T) {
	const isn = 1000 // stream offset 0 is at sequence 1001
	o := func(off int) uint32 { return uint32(isn + 1 + off) }
	syn := ab(isn, fSYN, "")
	cases := []seqCase{
		{
			name: "in order from SYN",
			segs: []seg{syn, ab(o(0), 0, "abc"), ab(o(3), fPSH, "def")},
			want: []string{"start", `data 0 "abc"`, `data 3 "def"`, "end close"},
		},
		{
			name: "mid-stream pickup: first segment with payload sets the start",
			segs: []seg{ab(5000, 0, ""), ab(5000, 0, "abc"), ab(5003, 0, "def"), ab(4990, 0, "0123456789"), ab(4995, 0, "56789ab")},
			want: []string{"start", `data 0 "abc"`, `data 3 "def"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.BeforeStart == 2 && st.Duplicates == 1 && st.EmptySegments == 1, "BeforeStart 2, Duplicates 1, EmptySegments 1")
			},
		},
		{
			name: "before the start by the signed difference from the start, however far",
			segs: []seg{ab(5000, 0, "abc"), ab(5000+0x80000001, 0, "far before"), ab(5003, 0, "d")},
			want: []string{"start", `data 0 "abc"`, `data 3 "d"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.BeforeStart == 1 && st.Gaps == 0, "BeforeStart 1, no gap")
			},
		},
		{
			name: "reordered segments are put back in order",
			segs: []seg{syn, ab(o(6), 0, "ghi"), ab(o(3), 0, "def"), ab(o(0), 0, "abc")},
			want: []string{"start", `data 0 "abc"`, `data 3 "defghi"`, "end close"},
		},
		{
			name: "exact duplicate dropped",
			segs: []seg{syn, ab(o(0), 0, "abc"), ab(o(0), 0, "abc"), ab(o(3), 0, "d")},
			want: []string{"start", `data 0 "abc"`, `data 3 "d"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.Duplicates == 1 && st.OverlapAnomalies == 0, "Duplicates 1, no anomaly")
			},
		},
		{
			name: "overlap with different bytes over held data: first copy wins",
			segs: []seg{syn, ab(o(3), 0, "def"), ab(o(0), 0, "abcXYZ")},
			want: []string{"start", `data 0 "abc"`, `data 3 "def"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.Overlaps == 1 && st.OverlapAnomalies == 1, "Overlaps 1, OverlapAnomalies 1")
			},
		},
		{
			name: "overlap with different bytes over delivered data (History)",
			cfg:  mirror.Config{History: true},
			segs: []seg{syn, ab(o(0), 0, "GOOD"), ab(o(0), 0, "EVIL"), ab(o(2), 0, "OD!")},
			want: []string{"start", `data 0 "GOOD"`, `data 4 "!"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.Duplicates == 1 && st.Overlaps == 1 && st.OverlapAnomalies == 1, "Duplicates 1, Overlaps 1, OverlapAnomalies 1")
			},
		},
		{
			name: "a later segment fills the uncovered bytes inside a hole",
			segs: []seg{syn, ab(o(0), 0, "a"), ab(o(9), 0, "jk"), ab(o(2), 0, "cd"), ab(o(1), 0, "bCDefghiJ")},
			// Bytes of the arriving segment go out straight from the frame, held
			// ones from the buffer: several Data calls, one contiguous stream.
			want: []string{"start", `data 0 "a"`, `data 1 "b"`, `data 2 "cd"`, `data 4 "efghi"`, `data 9 "jk"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.OverlapAnomalies == 1 && st.Overlaps == 1 && st.Gaps == 0, "one anomaly, one overlap, no gap")
			},
		},
		{
			name: "sequence numbers wrap around",
			segs: []seg{ab(0xfffffffc, fSYN, ""), ab(0xffffffff, 0, "bc"), ab(0xfffffffd, 0, "ab"), ab(1, 0, "de"), ab(3, 0, "f")},
			want: []string{"start", `data 0 "ab"`, `data 2 "bc"`, `data 4 "de"`, `data 6 "f"`, "end close"},
		},
		{
			name: "hole skipped at Close, data after it delivered",
			segs: []seg{syn, ab(o(0), 0, "abc"), ab(o(6), 0, "ghi")},
			want: []string{"start", `data 0 "abc"`, "gap 3 3", `data 6 "ghi"`, "end close"},
		},
		{
			name: "lost first segment after SYN is a gap at offset 0",
			segs: []seg{syn, ab(o(4), 0, "DATA")},
			want: []string{"start", "gap 0 4", `data 4 "DATA"`, "end close"},
		},
		{
			name: "touching holes are one gap",
			segs: []seg{syn, ab(o(0), 0, "a"), ab(o(5), 0, "f"), ab(o(3), 0, "d")},
			want: []string{"start", `data 0 "a"`, "gap 1 2", `data 3 "d"`, "gap 4 1", `data 5 "f"`, "end close"},
		},
		{
			name: "buffer bound reached: oldest holes skipped",
			cfg:  mirror.Config{BufferPerFlow: 8},
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), 0, "ef"), ab(o(20), 0, "uv")},
			open: true,
			want: []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`, "gap 6 14", `data 20 "uv"`},
			stats: func(st mirror.Stats) string {
				return expect(st.BufferFullSkips == 2 && st.Gaps == 2 && st.GapBytes == 16, "BufferFullSkips 2, Gaps 2, GapBytes 16")
			},
		},
		{
			name: "buffer bound: the arriving segment keeps its bytes inside the hole",
			cfg:  mirror.Config{BufferPerFlow: 8},
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(6), 0, "gh"), ab(o(3), 0, "defghijklmn")},
			open: true,
			want: []string{"start", `data 0 "ab"`, "gap 2 1", `data 3 "def"`, `data 6 "gh"`, `data 8 "ijklmn"`},
		},
		{
			name: "hole timeout in capture time",
			cfg:  mirror.Config{HoleTimeout: 10 * time.Millisecond},
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), 0, "ef").at(time.Millisecond), flushAt(10 * time.Millisecond), flushAt(11 * time.Millisecond)},
			open: true,
			want: []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`},
			stats: func(st mirror.Stats) string {
				return expect(st.TimeoutSkips == 1, "TimeoutSkips 1")
			},
		},
		{
			name: "hole timeout applied by a packet of another flow",
			cfg:  mirror.Config{HoleTimeout: 10 * time.Millisecond},
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), 0, "ef"), ba(77, 0, "x").at(20 * time.Millisecond)},
			open: true,
			want: []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`},
		},
		{
			name: "FIN ends the direction; later empty segments do not restart it; a new SYN does",
			segs: []seg{syn, ab(o(0), fFIN, "ab"), ab(o(3), 0, ""), ab(o(2), fFIN, ""), ab(o(0), 0, "ab"), ab(5000, fSYN, ""), ab(5001, 0, "new")},
			want: []string{"start", `data 0 "ab"`, "end fin", "start", `data 0 "new"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.LateSegments == 1 && st.Flows == 2, "LateSegments 1, Flows 2")
			},
		},
		{
			name: "FIN seen before the last data segment (reordered): wait for it",
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), fFIN, ""), ab(o(2), 0, "cd")},
			open: true,
			want: []string{"start", `data 0 "ab"`, `data 2 "cd"`, "end fin"},
		},
		{
			name: "FIN with a hole: skipped after HoleTimeout",
			cfg:  mirror.Config{HoleTimeout: 10 * time.Millisecond},
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), fFIN, "ef"), flushAt(5 * time.Millisecond), flushAt(10 * time.Millisecond)},
			open: true,
			want: []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`, "end fin"},
		},
		{
			name: "FIN with data missing before it and nothing held: ends after HoleTimeout without a gap",
			cfg:  mirror.Config{HoleTimeout: 10 * time.Millisecond},
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), fFIN, ""), flushAt(10 * time.Millisecond)},
			open: true,
			want: []string{"start", `data 0 "ab"`, "end fin"},
		},
		{
			name: "RST skips the holes and ends the direction",
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(4), 0, "ef"), ab(o(6), fRST, "zz"), ab(o(6), 0, "gh")},
			open: true,
			want: []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`, "end rst"},
		},
		{
			name: "SYN-ACK starts the other direction; both directions independent",
			segs: []seg{syn, ba(7000, fSYN, ""), ab(o(0), 0, "req"), ba(7001, 0, "resp")},
			want: []string{"start", `data 0 "req"`, "end close"},
			other: map[string][]string{
				"10.0.0.2:9000->10.0.0.1:40000": {"start", `data 0 "resp"`, "end close"},
			},
		},
		{
			name: "retransmitted SYN is ignored; handshake reordered behind data is ignored",
			segs: []seg{ab(o(0), 0, "abc"), syn, syn, ab(o(3), 0, "d")},
			want: []string{"start", `data 0 "abc"`, `data 3 "d"`, "end close"},
		},
		{
			name: "SYN with a new ISN restarts the direction",
			segs: []seg{syn, ab(o(0), 0, "abc"), ab(90000, fSYN, ""), ab(90001, 0, "x")},
			want: []string{"start", `data 0 "abc"`, "end restart", "start", `data 0 "x"`, "end close"},
		},
		{
			name: "segments without payload never set the start",
			segs: []seg{ab(100, 0, ""), ab(100, fFIN, ""), ab(200, 0, "a")},
			want: []string{"start", `data 0 "a"`, "end close"},
		},
		{
			name: "more than 32 separate held runs: the oldest hole is skipped",
			segs: func() []seg {
				s := []seg{syn, ab(o(0), 0, "a")}
				for i := 0; i < 33; i++ {
					s = append(s, ab(o(2+2*i), 0, "x"))
				}
				return s
			}(),
			open: true,
			want: []string{"start", `data 0 "a"`, "gap 1 1", `data 2 "x"`},
			stats: func(st mirror.Stats) string {
				return expect(st.RunLimitSkips == 1, "RunLimitSkips 1")
			},
		},
		{
			name: "verify: a corrupt first copy is dropped, the good retransmission wins",
			cfg:  mirror.Config{Checksum: mirror.ChecksumVerify},
			segs: []seg{syn, ab(o(0), 0, "EVIL").withCS(csBad), ab(o(0), 0, "GOOD")},
			want: []string{"start", `data 0 "GOOD"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.ChecksumBad == 1, "ChecksumBad 1")
			},
		},
		{
			name: "auto: a corrupt copy in a direction with good checksums is dropped",
			segs: []seg{syn, ab(o(0), 0, "ab"), ab(o(2), 0, "EVIL").withCS(csBad), ab(o(2), 0, "EVIL").withCS(csOffload), ab(o(2), 0, "GOOD")},
			want: []string{"start", `data 0 "ab"`, `data 2 "GOOD"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.ChecksumBad == 2 && st.OffloadedDirections == 0, "ChecksumBad 2, nothing offloaded")
			},
		},
		{
			name: "auto: offloaded checksums are accepted and reported",
			segs: []seg{ab(isn, fSYN, "").withCS(csOffload), ab(o(0), 0, "ab").withCS(csOffload), ab(o(2), 0, "cd").withCS(csOffload)},
			want: []string{"start", `data 0 "ab"`, `data 2 "cd"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.ChecksumOffloaded == 3 && st.OffloadedDirections == 1 && st.ChecksumBad == 0, "3 accepted as offloaded, 1 direction")
			},
		},
		{
			name: "auto: consistently failing garbage checksums: offloaded from the third data segment",
			segs: []seg{ab(100, 0, "ab").withCS(csBad), ab(102, 0, "cd").withCS(csBad), ab(104, 0, "ef").withCS(csBad), ab(106, 0, "gh").withCS(csBad)},
			want: []string{"start", `data 0 "ef"`, `data 2 "gh"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.ChecksumBad == 2 && st.ChecksumOffloaded == 2 && st.OffloadedDirections == 1, "2 dropped, 2 accepted")
			},
		},
		{
			name: "verify: offloaded checksums are dropped",
			cfg:  mirror.Config{Checksum: mirror.ChecksumVerify},
			segs: []seg{ab(o(0), 0, "ab").withCS(csOffload)},
			want: nil,
			stats: func(st mirror.Stats) string {
				return expect(st.ChecksumBad == 1, "ChecksumBad 1")
			},
		},
		{
			name: "ignore: bad checksums accepted",
			cfg:  mirror.Config{Checksum: mirror.ChecksumIgnore},
			segs: []seg{syn.withCS(csBad), ab(o(0), 0, "ab").withCS(csBad)},
			want: []string{"start", `data 0 "ab"`, "end close"},
		},
		{
			name: "IPv4 fragments are counted and dropped, their bytes become a gap",
			segs: []seg{syn, ab(o(0), 0, "ab"), func() seg { s := ab(o(2), 0, "cd"); s.fragMF = true; return s }(), ab(o(4), 0, "ef")},
			want: []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`, "end close"},
			stats: func(st mirror.Stats) string {
				return expect(st.Fragments == 1, "Fragments 1")
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, a := runSeqCase(t, c)
			if got := eventsOf(rec, keyAB); !reflect.DeepEqual(got, c.want) {
				t.Errorf("events:\n got %s\nwant %s", strings.Join(got, " | "), strings.Join(c.want, " | "))
			}
			for k, want := range c.other {
				var got []string
				for key, s := range rec.streams {
					if key.String() == k {
						got = s.events
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("events of %s:\n got %s\nwant %s", k, strings.Join(got, " | "), strings.Join(want, " | "))
				}
			}
			if c.stats != nil {
				if msg := c.stats(a.Stats()); msg != "" {
					t.Errorf("stats: want %s; got %+v", msg, a.Stats())
				}
			}
		})
	}
}

// expect returns "" when ok, else want.
func expect(ok bool, want string) string {
	if ok {
		return ""
	}
	return want
}

func TestFrameParsing(t *testing.T) {
	syn := ab(1000, fSYN, "")
	tests := []struct {
		name    string
		frame   []byte
		wantErr error
		deliver string
		stat    func(mirror.Stats) bool
	}{
		{"no VLAN, padded short frame", ethernet(appendIPv4(nil, ab(1001, 0, "ab"))), nil, "ab", nil},
		{"one 802.1Q tag", ethernet(appendIPv4(nil, ab(1001, 0, "ab")), 6), nil, "ab", nil},
		{"two tags (802.1ad + 802.1Q)", ethernet(appendIPv4(nil, ab(1001, 0, "ab")), 100, 6), nil, "ab", nil},
		{"three tags are not handled", ethernet(appendIPv4(nil, ab(1001, 0, "ab")), 1, 2, 3), nil, "", func(s mirror.Stats) bool { return s.NonTCP == 1 }},
		{"ARP ignored", func() []byte { f := ethernet(make([]byte, 28)); f[12], f[13] = 0x08, 0x06; return f }(), nil, "", func(s mirror.Stats) bool { return s.NonTCP == 1 }},
		{"UDP ignored", func() []byte { f := ethernet(appendIPv4(nil, ab(1001, 0, "ab"))); f[14+9] = 17; return f }(), nil, "", func(s mirror.Stats) bool { return s.NonTCP == 1 }},
		{"short frame", []byte{1, 2, 3}, mirror.ErrShortFrame, "", func(s mirror.Stats) bool { return s.Malformed == 1 }},
		{"truncated VLAN tag", []byte{0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10, 0x81, 0x00, 0}, mirror.ErrShortFrame, "", nil},
		{"IPv6 header in an IPv4 EtherType", func() []byte { f := ethernet(appendIPv4(nil, ab(1001, 0, "ab"))); f[14] = 0x65; return f }(), mirror.ErrIPv4Header, "", nil},
		{"IPv4 total length beyond the capture", ethernet(appendIPv4(nil, ab(1001, 0, "abcdefghijklmnopqrstuvwxyz")))[:70], mirror.ErrTruncated, "", func(s mirror.Stats) bool { return s.Truncated == 1 }},
		{"bad IPv4 header checksum", func() []byte { f := ethernet(appendIPv4(nil, ab(1001, 0, "ab"))); f[14+10] ^= 1; return f }(), mirror.ErrIPv4Checksum, "", func(s mirror.Stats) bool { return s.IPv4ChecksumBad == 1 }},
		{"TCP data offset beyond the segment", func() []byte {
			ip := appendIPv4(nil, ab(1001, 0, "ab"))
			ip[20+12] = 15 << 4
			return ethernet(ip)
		}(), mirror.ErrTCPHeader, "", func(s mirror.Stats) bool { return s.Malformed == 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t)
			a, _ := mirror.New(mirror.Config{}, rec)
			if err := a.HandleIPv4(appendIPv4(nil, syn), 0); err != nil {
				t.Fatal(err)
			}
			err := a.HandleFrame(tc.frame, 1)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("HandleFrame error %v, want %v", err, tc.wantErr)
			}
			a.Close()
			if got := string(rec.get(keyAB).data); got != tc.deliver {
				t.Errorf("delivered %q, want %q", got, tc.deliver)
			}
			if tc.stat != nil && !tc.stat(a.Stats()) {
				t.Errorf("stats %+v", a.Stats())
			}
		})
	}
}

func TestEviction(t *testing.T) {
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{MaxFlows: 2}, rec)
	if err != nil {
		t.Fatal(err)
	}
	flow := func(port uint16, data string, ts int64) {
		s := ab(100, 0, data)
		s.sport = port
		if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
			t.Fatal(err)
		}
	}
	flow(1, "a", 1)
	flow(2, "b", 2)
	flow(1, "c", 3) // flow 1 is now the most recently active
	flow(3, "d", 4) // evicts flow 2
	k2 := keyAB
	k2.SrcPort = 2
	if got, want := rec.get(k2).events, []string{"start", `data 0 "b"`, "end evicted"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("flow 2 events %q, want %q", got, want)
	}
	st := a.Stats()
	if st.Evictions != 1 || st.ActiveFlows != 2 {
		t.Fatalf("stats %+v", st)
	}
	a.Close()
	if st := a.Stats(); st.ActiveFlows != 0 || st.Flows != 3 {
		t.Fatalf("after Close: %+v", st)
	}
}

func TestConfigAndModes(t *testing.T) {
	for _, s := range []string{"auto", "verify", "ignore"} {
		m, err := mirror.ParseChecksumMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseChecksumMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := mirror.ParseChecksumMode("on"); !errors.Is(err, mirror.ErrChecksumMode) {
		t.Errorf("ParseChecksumMode(on) error %v", err)
	}
	var m mirror.ChecksumMode
	if err := m.Set("verify"); err != nil || m != mirror.ChecksumVerify {
		t.Errorf("Set(verify): %v %v", m, err)
	}
	for _, cfg := range []mirror.Config{{BufferPerFlow: -1}, {MaxFlows: -1}, {MaxFlows: mirror.MaxMaxFlows + 1}, {Checksum: 7}} {
		if _, err := mirror.New(cfg, &nopHandler{}); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := mirror.New(mirror.Config{}, nil); !errors.Is(err, mirror.ErrConfig) {
		t.Errorf("New with nil handler: %v", err)
	}
	if got := keyAB.String(); got != "10.0.0.1:40000->10.0.0.2:9000" {
		t.Errorf("FlowKey.String() = %q", got)
	}
	if keyAB.Reverse().Reverse() != keyAB || keyAB.Reverse().SrcPort != 9000 {
		t.Errorf("Reverse wrong: %v", keyAB.Reverse())
	}
}
