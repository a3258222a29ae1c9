package mirror_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tickwire/tickwire/mirror"
)

// TCP flags for test segments.
const (
	fFIN = 0x01
	fSYN = 0x02
	fRST = 0x04
	fPSH = 0x08
	fACK = 0x10
)

// Checksum corruption for test segments.
const (
	csGood    = iota
	csBad     // a wrong checksum that no offloading stack would leave
	csOffload // the pseudo-header sum, as Linux leaves it with TX offload
)

// seg describes one test TCP segment.
type seg struct {
	src, dst     [4]byte
	sport, dport uint16
	seq          uint32
	flags        uint8
	data         string
	ts           int64
	cs           int
	ipID         uint16
	fragMF       bool
}

var (
	ipA = [4]byte{10, 0, 0, 1}
	ipB = [4]byte{10, 0, 0, 2}
	// keyAB is the direction most tests use.
	keyAB = mirror.FlowKey{SrcIP: ipA, DstIP: ipB, SrcPort: 40000, DstPort: 9000}
)

// ab returns a segment from A to B.
func ab(seq uint32, flags uint8, data string) seg {
	return seg{src: ipA, dst: ipB, sport: 40000, dport: 9000, seq: seq, flags: flags | fACK, data: data}
}

// ba returns a segment from B to A.
func ba(seq uint32, flags uint8, data string) seg {
	return seg{src: ipB, dst: ipA, sport: 9000, dport: 40000, seq: seq, flags: flags | fACK, data: data}
}

// refSum is a plain RFC 1071 ones' complement sum, independent of the
// package's word-at-a-time version.
func refSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}

// appendIPv4 appends s as an IPv4 packet with correct checksums (unless s.cs
// says otherwise).
func appendIPv4(b []byte, s seg) []byte {
	tcpLen := 20 + len(s.data)
	total := 20 + tcpLen
	start := len(b)
	b = append(b, make([]byte, total)...)
	ip := b[start:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(total))
	binary.BigEndian.PutUint16(ip[4:], s.ipID)
	if s.fragMF {
		binary.BigEndian.PutUint16(ip[6:], 0x2000)
	} else {
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	}
	ip[8] = 64
	ip[9] = 6
	copy(ip[12:], s.src[:])
	copy(ip[16:], s.dst[:])
	binary.BigEndian.PutUint16(ip[10:], ^uint16(refSum(ip[:20])))
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], s.sport)
	binary.BigEndian.PutUint16(tcp[2:], s.dport)
	binary.BigEndian.PutUint32(tcp[4:], s.seq)
	binary.BigEndian.PutUint32(tcp[8:], 1)
	tcp[12] = 5 << 4
	tcp[13] = s.flags
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	copy(tcp[20:], s.data)
	pseudo := make([]byte, 0, 12)
	pseudo = append(pseudo, s.src[:]...)
	pseudo = append(pseudo, s.dst[:]...)
	pseudo = append(pseudo, 0, 6, byte(tcpLen>>8), byte(tcpLen))
	ps := refSum(pseudo)
	sum := ps + refSum(tcp)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	ck := ^uint16(sum)
	switch s.cs {
	case csBad:
		ck ^= 0x5a5a
		if ck == uint16(ps) || ck == ^uint16(ps) || ck == 0 {
			ck ^= 0x0101
		}
	case csOffload:
		ck = uint16(ps)
	}
	binary.BigEndian.PutUint16(tcp[16:], ck)
	return b
}

// ethernet wraps an IPv4 packet in an Ethernet frame with the given VLAN
// tags (TPIDs alternate 802.1ad outside, 802.1Q inside) and padding to 60
// bytes.
func ethernet(ip []byte, vlans ...uint16) []byte {
	f := []byte{0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10}
	for i, id := range vlans {
		tpid := uint16(0x8100)
		if i == 0 && len(vlans) > 1 {
			tpid = 0x88a8
		}
		f = binary.BigEndian.AppendUint16(f, tpid)
		f = binary.BigEndian.AppendUint16(f, id)
	}
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	f = append(f, ip...)
	for len(f) < 60 {
		f = append(f, 0xee) // padding is not data
	}
	return f
}

type gapRec struct{ Off, Len uint64 }

// stream is what a recorder saw for one flow direction.
type stream struct {
	starts int
	data   []byte // delivered bytes, gaps left out
	gaps   []gapRec
	ends   []mirror.EndReason
	next   uint64 // offset after the last Data or Gap
	// bytes maps stream offsets to delivered bytes (with gaps as holes), for
	// the property tests.
	img       []byte // stream image of the current flow: delivered bytes at their offsets
	delivered []bool // which offsets of img were delivered (the others are gaps)
	events    []string
}

// recorder is a Handler that checks the call-order contract and records
// everything per flow direction.
type recorder struct {
	t       testing.TB
	streams map[mirror.FlowKey]*stream
	order   []mirror.FlowKey
	quiet   bool // do not record event strings
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, streams: map[mirror.FlowKey]*stream{}}
}

func (r *recorder) get(k mirror.FlowKey) *stream {
	s := r.streams[k]
	if s == nil {
		s = &stream{}
		r.streams[k] = s
		r.order = append(r.order, k)
	}
	return s
}

func (r *recorder) FlowStart(k mirror.FlowKey, ts int64) {
	s := r.get(k)
	if s.starts > len(s.ends) {
		r.t.Errorf("%v: FlowStart twice without FlowEnd", k)
	}
	s.starts++
	s.next = 0
	s.img, s.delivered = s.img[:0], s.delivered[:0]
	if !r.quiet {
		s.events = append(s.events, "start")
	}
}

func (r *recorder) Data(k mirror.FlowKey, off uint64, data []byte, ts int64) {
	s := r.get(k)
	if s.starts != len(s.ends)+1 {
		r.t.Errorf("%v: Data outside a flow", k)
	}
	if off != s.next {
		r.t.Errorf("%v: Data at %d, want %d", k, off, s.next)
	}
	if len(data) == 0 {
		r.t.Errorf("%v: empty Data at %d", k, off)
	}
	s.next = off + uint64(len(data))
	s.data = append(s.data, data...)
	if !r.quiet {
		s.img = append(s.img, data...)
		for range data {
			s.delivered = append(s.delivered, true)
		}
	}
	if !r.quiet {
		s.events = append(s.events, fmt.Sprintf("data %d %q", off, data))
	}
}

func (r *recorder) Gap(k mirror.FlowKey, off, n uint64, ts int64) {
	s := r.get(k)
	if s.starts != len(s.ends)+1 {
		r.t.Errorf("%v: Gap outside a flow", k)
	}
	if off != s.next {
		r.t.Errorf("%v: Gap at %d, want %d", k, off, s.next)
	}
	if n == 0 {
		r.t.Errorf("%v: empty Gap at %d", k, off)
	}
	if len(s.gaps) > 0 && s.gaps[len(s.gaps)-1].Off+s.gaps[len(s.gaps)-1].Len == off && s.starts == 1 {
		r.t.Errorf("%v: touching gaps at %d", k, off)
	}
	s.next = off + n
	s.gaps = append(s.gaps, gapRec{off, n})
	if !r.quiet && n < 1<<24 {
		s.img = append(s.img, make([]byte, n)...)
		s.delivered = append(s.delivered, make([]bool, n)...)
	}
	if !r.quiet {
		s.events = append(s.events, fmt.Sprintf("gap %d %d", off, n))
	}
}

func (r *recorder) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	s := r.get(k)
	if s.starts != len(s.ends)+1 {
		r.t.Errorf("%v: FlowEnd outside a flow", k)
	}
	s.ends = append(s.ends, reason)
	if !r.quiet {
		s.events = append(s.events, "end "+reason.String())
	}
}

// nopHandler discards everything; it counts bytes so the work is not dead.
type nopHandler struct{ bytes, gaps uint64 }

func (h *nopHandler) FlowStart(mirror.FlowKey, int64) {}
func (h *nopHandler) Data(_ mirror.FlowKey, _ uint64, data []byte, _ int64) {
	h.bytes += uint64(len(data))
}
func (h *nopHandler) Gap(_ mirror.FlowKey, _, n uint64, _ int64)      { h.gaps += n }
func (h *nopHandler) FlowEnd(mirror.FlowKey, mirror.EndReason, int64) {}
