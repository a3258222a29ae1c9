package tickwire

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

// ringModel checks a udpRing against a plain queue: every push is taken
// exactly when the bounds allow it (wrapping never loses room), every pop
// returns the oldest datagram with its metadata, and the buffer never
// grows past its limit.
type ringModel struct {
	r     udpRing
	queue [][]byte
	bytes int
	seq   int64
}

func (m *ringModel) push(t testing.TB, n int) {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(int(m.seq) + i)
	}
	m.seq++
	from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(m.seq)}), uint16(m.seq))
	want := n <= m.r.maxPayload && len(m.queue) < m.r.maxN && m.bytes < m.r.maxBytes
	if got := m.r.push(p, from, m.seq, uint32(m.seq)+1, uint64(m.seq)+2); got != want {
		t.Fatalf("push of %d bytes with %d datagrams, %d bytes queued (bounds %d, %d): %v, want %v",
			n, len(m.queue), m.bytes, m.r.maxN, m.r.maxBytes, got, want)
	}
	if want {
		m.queue = append(m.queue, p)
		m.bytes += udpRecordSize(n)
	}
	m.r.mu.Lock()
	size := len(m.r.buf)
	m.r.mu.Unlock()
	if size > m.r.limit() {
		t.Fatalf("buffer of %d bytes, limit %d", size, m.r.limit())
	}
}

func (m *ringModel) pop(t testing.TB, buf []byte) {
	n, from, rx, group, ip, ok := m.r.pop(buf)
	if len(m.queue) == 0 {
		if ok {
			t.Fatal("pop from an empty ring returned a datagram")
		}
		return
	}
	want := m.queue[0]
	m.queue = m.queue[1:]
	m.bytes -= udpRecordSize(len(want))
	seq := rx
	if !ok || n != min(len(want), len(buf)) || !bytes.Equal(buf[:n], want[:n]) {
		t.Fatalf("pop: %d bytes %x ok %v, want %x", n, buf[:n], ok, want)
	}
	if from.Port() != uint16(seq) || from.Addr().As4()[3] != byte(seq) || group != uint32(seq)+1 || ip != uint64(seq)+2 {
		t.Fatalf("pop: metadata %v %d %d %d out of step", from, rx, group, ip)
	}
	if m.r.queued() != (len(m.queue) > 0) {
		t.Fatalf("queued() = %v with %d datagrams", m.r.queued(), len(m.queue))
	}
}

// FuzzUDPRing drives a small ring with pushes and pops (each input byte
// one: an even byte pops into a buffer of its value's size, an odd byte
// pushes a datagram of up to 127*3 bytes) against ringModel. The first two
// bytes set the bounds.
func FuzzUDPRing(f *testing.F) {
	f.Add([]byte{8, 40, 0xff, 0xff, 0x81, 0x21, 0x02, 0xff, 0xff, 0x80, 0xc1})
	f.Add(bytes.Repeat([]byte{0x7f, 0x7f, 0x00}, 50))
	f.Add(append(bytes.Repeat([]byte{0x41}, 40), bytes.Repeat([]byte{0xfe, 0x03}, 60)...))
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 2 {
			return
		}
		var m ringModel
		m.r.init(1+int(ops[0]), 1+int(ops[1])*64, 300)
		buf := make([]byte, 256)
		for _, op := range ops[2:] {
			if op&1 == 0 {
				m.pop(t, buf[:op])
			} else {
				m.push(t, int(op>>1)*3)
			}
		}
		for len(m.queue) > 0 {
			m.pop(t, buf)
		}
		m.pop(t, buf)
	})
}

// TestUDPRingFill: a ring bounded in bytes holds many more small datagrams
// than large ones, and refills after wrapping without growing past its
// limit (sizes that make every record wrap at a different offset).
func TestUDPRingFill(t *testing.T) {
	for _, size := range []int{0, 1, 64, 200, 1472} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var m ringModel
			m.r.init(DefaultUDPReceiveQueue, 64<<10, 1472)
			buf := make([]byte, 2048)
			for round := range 5 {
				for m.bytes < m.r.maxBytes {
					m.push(t, size)
				}
				if want := (64<<10 + udpRecordSize(size) - 1) / udpRecordSize(size); len(m.queue) != want {
					t.Fatalf("round %d: %d datagrams of %d bytes taken, want %d", round, len(m.queue), size, want)
				}
				m.push(t, size) // refused: full
				for range len(m.queue) / 3 * (round%2 + 1) {
					m.pop(t, buf)
				}
			}
			for len(m.queue) > 0 {
				m.pop(t, buf)
			}
		})
	}
}

// TestUDPRingAllocs: once grown, pushing and popping allocates nothing.
func TestUDPRingAllocs(t *testing.T) {
	var r udpRing
	r.init(DefaultUDPReceiveQueue, DefaultUDPReceiveBuffer, 1472)
	p, buf := make([]byte, 64), make([]byte, 2048)
	from := netip.MustParseAddrPort("10.0.0.1:9")
	for range 100 {
		r.push(p, from, 0, 0, 0)
	}
	for range 100 {
		r.pop(buf)
	}
	if n := testing.AllocsPerRun(1000, func() {
		r.push(p, from, 0, 0, 0)
		r.push(p, from, 0, 0, 0)
		r.pop(buf)
		r.pop(buf)
	}); n != 0 {
		t.Errorf("%v allocations per push and pop", n)
	}
}
