package pcap

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/frame"
)

// ngFile builds a pcapng file block by block, in one byte order, so tests
// control every field the reader sees.
type ngFile struct {
	order binary.AppendByteOrder
	b     []byte
}

func newNG(order binary.AppendByteOrder) *ngFile {
	n := &ngFile{order: order}
	n.section()
	return n
}

// ngOption is one option of a block: its code and value (padded here).
type ngOption struct {
	code  uint16
	value []byte
}

// block appends a block of type typ with the given body and options.
func (n *ngFile) block(typ uint32, body []byte, opts ...ngOption) *ngFile {
	body = append([]byte(nil), body...)
	for i := len(body); i%4 != 0; i++ {
		body = append(body, 0)
	}
	if len(opts) > 0 {
		for _, o := range opts {
			body = n.order.AppendUint16(body, o.code)
			body = n.order.AppendUint16(body, uint16(len(o.value)))
			body = append(body, o.value...)
			for len(body)%4 != 0 {
				body = append(body, 0)
			}
		}
		body = append(body, 0, 0, 0, 0) // opt_endofopt
	}
	total := uint32(12 + len(body))
	n.b = n.order.AppendUint32(n.b, typ)
	n.b = n.order.AppendUint32(n.b, total)
	n.b = append(n.b, body...)
	n.b = n.order.AppendUint32(n.b, total)
	return n
}

func (n *ngFile) section() *ngFile {
	var body []byte
	body = n.order.AppendUint32(body, ngByteOrderMagic)
	body = n.order.AppendUint16(body, 1)
	body = n.order.AppendUint16(body, 0)
	body = n.order.AppendUint64(body, ^uint64(0))
	return n.block(ngBlockSection, body)
}

func (n *ngFile) iface(link layers.LinkType, snap uint32, opts ...ngOption) *ngFile {
	var body []byte
	body = n.order.AppendUint16(body, uint16(link))
	body = n.order.AppendUint16(body, 0)
	body = n.order.AppendUint32(body, snap)
	return n.block(ngBlockInterface, body, opts...)
}

func (n *ngFile) epb(id uint32, ts uint64, data []byte, wireLen int, opts ...ngOption) *ngFile {
	var body []byte
	body = n.order.AppendUint32(body, id)
	body = n.order.AppendUint32(body, uint32(ts>>32))
	body = n.order.AppendUint32(body, uint32(ts))
	body = n.order.AppendUint32(body, uint32(len(data)))
	body = n.order.AppendUint32(body, uint32(wireLen))
	return n.block(ngBlockEnhanced, append(body, data...), opts...)
}

func (n *ngFile) pb(id uint16, ts uint64, data []byte) *ngFile {
	var body []byte
	body = n.order.AppendUint16(body, id)
	body = n.order.AppendUint16(body, 0)
	body = n.order.AppendUint32(body, uint32(ts>>32))
	body = n.order.AppendUint32(body, uint32(ts))
	body = n.order.AppendUint32(body, uint32(len(data)))
	body = n.order.AppendUint32(body, uint32(len(data)))
	return n.block(ngBlockPacket, append(body, data...))
}

func (n *ngFile) spb(data []byte, wireLen int) *ngFile {
	body := n.order.AppendUint32(nil, uint32(wireLen))
	return n.block(ngBlockSimple, append(body, data...))
}

func opt8(order binary.AppendByteOrder, v uint64) []byte { return order.AppendUint64(nil, v) }

// allocated returns the bytes allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// memoryBound is what reading any file may allocate: the bound in the
// package doc, with room for the test's own batch and the runtime.
const memoryBound = 2 << 20

// idbStream generates, without holding it, a little-endian pcapng file of
// sections of perSection minimal interface descriptions (20 bytes each),
// each section ending with one 60-byte packet on its last interface, until
// total interfaces were described.
type idbStream struct {
	perSection, left int
	pending          []byte // the rest of the block being emitted
	inSection        int    // interfaces emitted in the current section
	shb, idb         []byte
	packets          int
}

func newIDBStream(total, perSection int) *idbStream {
	s := &idbStream{perSection: perSection, left: total}
	s.shb = newNG(binary.LittleEndian).b
	s.idb = (&ngFile{order: binary.LittleEndian}).iface(layers.LinkTypeEthernet, 0).b
	s.pending = s.shb
	return s
}

// packet is the block that ends a section whose last interface is id.
func (s *idbStream) packet(id int) []byte {
	data := make([]byte, 60)
	data[0] = byte(s.packets)
	return (&ngFile{order: binary.LittleEndian}).epb(uint32(id), uint64(s.packets), data, 60).b
}

func (s *idbStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(s.pending) == 0 {
			switch {
			case s.inSection == -1 && s.left > 0:
				s.pending, s.inSection = s.shb, 0
			case s.inSection == s.perSection || s.left == 0 && s.inSection > 0:
				s.pending = s.packet(s.inSection - 1)
				s.packets++
				s.inSection = -1 // a section header comes next, if any
			case s.left == 0:
				if n == 0 {
					return 0, io.EOF
				}
				return n, nil
			default:
				s.pending = s.idb
				s.inSection++
				s.left--
			}
		}
		c := copy(p[n:], s.pending)
		s.pending = s.pending[c:]
		n += c
	}
	return n, nil
}

// TestPcapngTooManyInterfaces reads the capture of issue 12, 5 million
// interface descriptions in one section (100 MB), plain and gzipped: the
// reader stops at the interface past MaxInterfaces with
// ErrTooManyInterfaces, having allocated a small constant.
func TestPcapngTooManyInterfaces(t *testing.T) {
	const flood = 5_000_000
	check := func(t *testing.T, src io.Reader) {
		t.Helper()
		var err error
		var n int
		alloc := allocated(func() {
			var r *Reader
			r, err = NewReader(src)
			if err != nil {
				return
			}
			n, err = r.ReadFrames(frame.NewBatch(4, 2048))
		})
		var re *RecordError
		if n != 0 || !errors.Is(err, ErrTooManyInterfaces) || !errors.As(err, &re) || re.Record != 1 {
			t.Fatalf("read %d frames, err %v; want record 1: ErrTooManyInterfaces", n, err)
		}
		if want := "pcap: record 1: too many interfaces (more than 4096)"; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		if alloc > memoryBound {
			t.Errorf("allocated %d bytes, want at most %d", alloc, memoryBound)
		}
		t.Logf("%v after %d KiB allocated", err, alloc>>10)
	}
	t.Run("plain", func(t *testing.T) { check(t, newIDBStream(flood, flood)) })
	t.Run("gzip", func(t *testing.T) {
		// Only the first MiB of the file is compressed, which is quicker than
		// all 100 MB under the race detector. The reader must stop well
		// before the end of it: at the end it would fail with
		// io.ErrUnexpectedEOF instead.
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
		if _, err := io.CopyN(zw, newIDBStream(flood, flood), 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
		check(t, &z)
	})
}

// TestPcapngInterfacesAtTheBound reads sections of exactly MaxInterfaces
// interfaces, with a packet on the last one of each: every packet is read,
// and a million interfaces in all cost no more than one section.
func TestPcapngInterfacesAtTheBound(t *testing.T) {
	total := 1 << 20
	if raceEnabled {
		total = 1 << 17
	}
	sections := total / MaxInterfaces
	var got []testFrame
	var err error
	alloc := allocated(func() {
		var r *Reader
		if r, err = NewReader(newIDBStream(total, MaxInterfaces)); err != nil {
			return
		}
		got, err = readAll(t, r, 2048)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != sections {
		t.Fatalf("read %d frames, want %d", len(got), sections)
	}
	for i, f := range got {
		if f.ts != int64(i)*1000 || f.wireLen != 60 || f.data[0] != byte(i) {
			t.Fatalf("frame %d: ts %d wire %d first byte %d", i, f.ts, f.wireLen, f.data[0])
		}
	}
	// readAll's copies of the frames are part of alloc.
	if alloc > memoryBound+uint64(sections)*128 {
		t.Errorf("allocated %d bytes for %d interfaces, want at most %d", alloc, total, memoryBound)
	}
	t.Logf("%d interfaces in %d sections: %d KiB allocated", total, sections, alloc>>10)
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestPcapngBlockLength reads a block of exactly MaxBlockLen bytes, which is
// skipped in constant memory, and refuses one a word longer.
func TestPcapngBlockLength(t *testing.T) {
	le := binary.LittleEndian
	head := newNG(le).iface(layers.LinkTypeEthernet, 0).b
	tail := newNG(le).iface(layers.LinkTypeEthernet, 0).epb(0, 5, []byte("after the big block"), 19).b
	tail = tail[len(newNG(le).iface(layers.LinkTypeEthernet, 0).b):] // the packet block alone
	big := func(total uint32) io.Reader {
		var h []byte
		h = le.AppendUint32(h, 0x0bad) // a block type the reader does not know
		h = le.AppendUint32(h, total)
		return io.MultiReader(bytes.NewReader(head), bytes.NewReader(h),
			io.LimitReader(zeros{}, int64(total)-12), bytes.NewReader(le.AppendUint32(nil, total)), bytes.NewReader(tail))
	}
	var got []testFrame
	var err error
	alloc := allocated(func() {
		var r *Reader
		if r, err = NewReader(big(MaxBlockLen)); err == nil {
			got, err = readAll(t, r, 2048)
		}
	})
	if err != nil || len(got) != 1 || string(got[0].data) != "after the big block" {
		t.Fatalf("block of MaxBlockLen: %d frames, err %v", len(got), err)
	}
	if alloc > memoryBound {
		t.Errorf("allocated %d bytes skipping a block of %d", alloc, MaxBlockLen)
	}
	r, err := NewReader(big(MaxBlockLen + 4))
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, r, 2048)
	if !errors.Is(err, ErrBlockTooLarge) {
		t.Fatalf("block of MaxBlockLen+4: %v, want ErrBlockTooLarge", err)
	}
	t.Log(err)
}

// TestPcapngRecordLength reads a record of MaxRecordLen bytes, whole and cut
// by a small slot, and refuses one a byte longer.
func TestPcapngRecordLength(t *testing.T) {
	le := binary.LittleEndian
	data := make([]byte, MaxRecordLen)
	for i := range data {
		data[i] = byte(i / 7)
	}
	ok := newNG(le).iface(layers.LinkTypeEthernet, 0).epb(0, 1, data, MaxRecordLen).epb(0, 2, data[:10], 10).b
	for _, slot := range []int{MaxRecordLen, 2048} {
		r, err := NewReader(bytes.NewReader(ok))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, r, slot)
		if err != nil || len(got) != 2 {
			t.Fatalf("slot %d: %d frames, err %v", slot, len(got), err)
		}
		if got[0].wireLen != MaxRecordLen || !bytes.Equal(got[0].data, data[:slot]) || !bytes.Equal(got[1].data, data[:10]) {
			t.Fatalf("slot %d: frames differ", slot)
		}
		if slot < MaxRecordLen && r.Stats().Truncated != 1 {
			t.Fatalf("slot %d: stats %+v", slot, r.Stats())
		}
	}
	long := newNG(le).iface(layers.LinkTypeEthernet, 0).epb(0, 1, data[:10], 10).epb(0, 1, append(data, 0), MaxRecordLen+1).b
	r, err := NewReader(bytes.NewReader(long))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r, 2048)
	var re *RecordError
	if len(got) != 1 || !errors.Is(err, ErrRecordTooLarge) || !errors.As(err, &re) || re.Record != 2 {
		t.Fatalf("%d frames, err %v; want 1 then record 2: ErrRecordTooLarge", len(got), err)
	}
}

// TestPcapngBlocks reads every packet block kind, in both byte orders and
// across sections, with the timestamp options: times, lengths and data come
// out as written, and blocks the reader does not use are skipped.
func TestPcapngBlocks(t *testing.T) {
	base := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC).UnixNano()
	secs := uint64(base / 1e9)
	p1, p2, p3 := []byte("first packet"), []byte("second, on a microsecond interface"), []byte("third")
	for _, order := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
		other := binary.AppendByteOrder(binary.BigEndian)
		if order == binary.BigEndian {
			other = binary.LittleEndian
		}
		n := newNG(order)
		n.block(4, []byte("name resolution block, skipped"))
		n.iface(layers.LinkTypeEthernet, 0,
			ngOption{2, []byte("eth0")}, ngOption{ngOptTSResol, []byte{9}}, ngOption{3, make([]byte, 1001)})
		n.iface(layers.LinkTypeEthernet, 0, ngOption{ngOptTSOffset, opt8(order, 10)})  // microseconds, 10 s later
		n.iface(layers.LinkTypeLinuxSLL, 0)                                            // another link type
		n.iface(layers.LinkTypeEthernet, 0, ngOption{ngOptTSResol, []byte{0x80 | 10}}) // 1/1024 s
		n.iface(layers.LinkTypeEthernet, 0, ngOption{ngOptTSResol, []byte{12}})        // picoseconds
		n.epb(0, uint64(base)+7, p1, 100, ngOption{1, []byte("a comment, skipped")})
		n.epb(2, 1, []byte("a cooked frame"), 14)
		n.epb(1, secs*1e6+123456, p2, len(p2))
		n.block(5, make([]byte, 20)) // interface statistics, skipped
		n.pb(3, secs*1024+512, p3)
		n.epb(4, 1000*1e12+999_999_999_999, p1, len(p1)) // picoseconds wrap in 213 days
		n.spb(p3, len(p3))
		// A section in the other byte order forgets the interfaces above.
		m := newNG(other)
		m.iface(layers.LinkTypeEthernet, 4)
		m.epb(0, uint64(base)/1000+1, p2, len(p2))
		m.spb(p2, len(p2))
		m.b = append(n.b, m.b...)

		want := []testFrame{
			{ts: base + 7, data: p1, wireLen: 100},
			{ts: 1000, data: []byte("a cooked frame"), wireLen: 14, link: frame.LinkTypeLinuxSLL},
			{ts: (int64(secs)+10)*1e9 + 123456000, data: p2, wireLen: len(p2)},
			{ts: int64(secs)*1e9 + 5e8, data: p3, wireLen: len(p3)},
			{ts: 1000*1e9 + 999_999_999, data: p1, wireLen: len(p1)},
			{ts: 0, data: p3, wireLen: len(p3)},
			{ts: base + 1000, data: p2, wireLen: len(p2)},
			{ts: 0, data: p2[:4], wireLen: len(p2)}, // the snap length cuts a simple packet
		}
		r, err := NewReader(bytes.NewReader(m.b))
		if err != nil {
			t.Fatal(err)
		}
		if r.Format() != FormatPcapNG || r.LinkType() != layers.LinkTypeEthernet {
			t.Fatalf("format %v link %v", r.Format(), r.LinkType())
		}
		got, err := readAll(t, r, 2048)
		if err != nil {
			t.Fatal(err)
		}
		checkSame(t, got, want)
	}
}

// TestPcapngMalformed corrupts a small file one field at a time: each is a
// HeaderError or RecordError, with the frames before it still read.
func TestPcapngMalformed(t *testing.T) {
	le := binary.LittleEndian
	good := func() *ngFile { return newNG(le).iface(layers.LinkTypeEthernet, 0).epb(0, 1, []byte("ok"), 2) }
	shbLen := len(newNG(le).b)
	idbEnd := len(newNG(le).iface(layers.LinkTypeEthernet, 0).b)
	epb := func() []byte { return good().b[idbEnd:] } // the good packet block
	withTail := func(blocks []byte) []byte { return append(good().b, blocks...) }
	set32 := func(b []byte, off int, v uint32) []byte { le.PutUint32(b[off:], v); return b }
	// An interface option whose length runs past its block.
	badOption := newNG(le).iface(1, 0, ngOption{2, []byte("abcd")}).b[shbLen:]
	binary.LittleEndian.PutUint16(badOption[18:], 200)
	cases := []struct {
		name   string
		file   []byte
		header bool // the error is in the header, before any record
	}{
		{"bad byte-order magic", set32(good().b, 8, 0x11223344), true},
		{"version 2.0", func() []byte { b := good().b; le.PutUint16(b[12:], 2); return b }(), true},
		{"section too short", set32(set32(good().b, 4, 24), 20, 24), true},
		{"first block not a section", set32(good().b, 0, 1), true},
		{"packet before interface", append(newNG(le).b, epb()...), true},
		{"block length not a word multiple", withTail(set32(epb(), 4, 37)), false},
		{"block length below 12", withTail(set32(epb(), 4, 8)), false},
		{"trailer mismatch", withTail(set32(epb(), len(epb())-4, 40)), false},
		{"unknown interface", withTail(set32(epb(), 8, 1)), false},
		{"captured length overflows block", withTail(set32(epb(), 20, 9)), false},
		{"huge captured length", withTail(set32(epb(), 20, 0xfffffff0)), false},
		{"huge block", withTail(set32(epb(), 4, 0xfffffff0)), false},
		{"interface option overflows", withTail(badOption), false},
		{"binary resolution too fine", withTail(newNG(le).iface(1, 0, ngOption{ngOptTSResol, []byte{0x80 | 64}}).b[shbLen:]), false},
		{"decimal resolution too fine", withTail(newNG(le).iface(1, 0, ngOption{ngOptTSResol, []byte{20}}).b[shbLen:]), false},
		{"simple packet too short", withTail(set32(newNG(le).iface(1, 0).spb(nil, 0).b[idbEnd:], 4, 12)), false},
		{"truncated in packet data", withTail(epb()[:30]), false},
		{"truncated in header", withTail(epb()[:6]), false},
		{"bad version in second section", withTail(func() []byte { b := newNG(le).b; le.PutUint16(b[12:], 3); return b }()), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(c.file))
			if c.header {
				var he *HeaderError
				if !errors.As(err, &he) {
					t.Fatalf("err %v, want a HeaderError", err)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, r, 2048)
			var re *RecordError
			if len(got) != 1 || !errors.As(err, &re) || re.Record != 2 {
				t.Fatalf("%d frames, err %v; want 1 frame then a record 2 error", len(got), err)
			}
			t.Log(err)
		})
	}
}
