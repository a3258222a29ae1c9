package step

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// msg builds one message; category 7 unless cat is 0 (no category fields).
func msg(seq uint64, cat uint32, catSeq uint64, payload []byte) []byte {
	h := Header{
		MsgType: []byte("UA3201"), SenderCompID: []byte("VDE"), TargetCompID: []byte("VSS"),
		SeqNum: seq, SendingTime: []byte("20260105-09:30:00"),
		HasCategory: cat != 0, Category: cat, CategorySeq: catSeq,
	}
	return AppendMessage(nil, &h, payload)
}

// got is what a test collects from a parser: messages (copied) and errors.
type got struct {
	payloads [][]byte
	seqs     []uint64
	gaps     []string
	errs     []error
}

func drain(t *testing.T, p *Parser, g *got) {
	t.Helper()
	for range 1 << 20 {
		m, err := p.Next()
		if err != nil {
			g.errs = append(g.errs, err)
			continue
		}
		if m == nil {
			return
		}
		checkStraightPath(t, m)
		g.payloads = append(g.payloads, bytes.Clone(m.Payload))
		g.seqs = append(g.seqs, m.SeqNum)
		if m.Gap {
			g.gaps = append(g.gaps, fmt.Sprintf("%d:%d->%d", m.Category, m.ExpectedSeq, m.CategorySeq))
		}
	}
	t.Fatal("Next did not return (nil, nil)")
}

// checkStraightPath requires finishStd, when it takes m, to find what the
// general field loop finds.
func checkStraightPath(t *testing.T, m *Message) {
	t.Helper()
	_, body, _, err := frame(m.Raw, len(m.Raw))
	if err != nil {
		t.Fatal(err)
	}
	hdr := m.Raw[:len(m.Raw)-trailerLen]
	std, general := Message{Raw: m.Raw}, Message{Raw: m.Raw}
	if !finishStd(&std, hdr, body) {
		return
	}
	if _, ok := parseFields(&general, hdr, body); !ok || fmt.Sprint(std) != fmt.Sprint(general) {
		t.Fatalf("straight path %+v, general loop (ok %v) %+v", std, ok, general)
	}
}

func feedChunks(t *testing.T, p *Parser, stream []byte, sizes func() int) *got {
	t.Helper()
	g := &got{}
	for len(stream) > 0 {
		n := min(sizes(), len(stream))
		p.Feed(stream[:n])
		stream = stream[n:]
		drain(t, p, g)
	}
	return g
}

func TestKnownMessage(t *testing.T) {
	// Hand-computed: body length and checksum of a tiny message.
	body := "35=UA3201\x0134=1\x0110142=7\x0110072=5\x0195=3\x0196=a\x01b\x01"
	head := fmt.Sprintf("8=STEP.1.0.0\x019=%d\x01", len(body))
	sum := 0
	for _, c := range []byte(head + body) {
		sum += int(c)
	}
	wire := fmt.Sprintf("%s%s10=%03d\x01", head, body, sum%256)
	h := Header{MsgType: []byte("UA3201"), SeqNum: 1, HasCategory: true, Category: 7, CategorySeq: 5}
	if enc := AppendMessage(nil, &h, []byte("a\x01b")); string(enc) != wire {
		t.Fatalf("AppendMessage\n got %q\nwant %q", enc, wire)
	}
	p := NewParser(Config{})
	p.Feed([]byte(wire))
	m, err := p.Next()
	if err != nil || m == nil {
		t.Fatalf("Next = %v, %v", m, err)
	}
	if string(m.MsgType) != "UA3201" || m.SeqNum != 1 || m.Category != 7 || m.CategorySeq != 5 ||
		string(m.Payload) != "a\x01b" || string(m.Raw) != wire || m.Offset != 0 {
		t.Fatalf("parsed %+v", m)
	}
}

func TestAnySplit(t *testing.T) {
	var stream []byte
	var want [][]byte
	for i := range 50 {
		pl := bytes.Repeat([]byte{byte(i), SOH, '8', '='}, i)
		want = append(want, pl)
		stream = append(stream, msg(uint64(i+1), 7, uint64(i+100), pl)...)
	}
	for _, sizes := range []int{1, 2, 3, 7, 31, 1408, 1 << 20} {
		p := NewParser(Config{})
		g := feedChunks(t, p, stream, func() int { return sizes })
		if len(g.errs) != 0 || len(g.gaps) != 0 || len(g.payloads) != len(want) {
			t.Fatalf("chunk %d: %d msgs, errs %v, gaps %v", sizes, len(g.payloads), g.errs, g.gaps)
		}
		for i := range want {
			if !bytes.Equal(g.payloads[i], want[i]) || g.seqs[i] != uint64(i+1) {
				t.Fatalf("chunk %d: message %d differs", sizes, i)
			}
		}
		if st := p.Stats(); st.Messages != 50 || st.Bytes != uint64(len(stream)) || st.SkippedBytes != 0 {
			t.Fatalf("chunk %d: stats %+v", sizes, st)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	p := NewParser(Config{})
	g := feedChunks(t, p, stream, func() int { return 1 + r.IntN(300) })
	if len(g.payloads) != 50 || len(g.errs) != 0 {
		t.Fatalf("random chunks: %d msgs, errs %v", len(g.payloads), g.errs)
	}
}

func TestErrorsAndResync(t *testing.T) {
	good := func(seq uint64) []byte { return msg(seq, 7, seq, []byte{0x80 | byte(seq)}) }
	badSum := good(3)
	badSum[len(badSum)-2]++ // last checksum digit
	if badSum[len(badSum)-2] > '9' {
		badSum[len(badSum)-2] = '0'
	}
	noTrailer := good(4)
	copy(noTrailer[len(noTrailer)-7:], "11=")
	badField := AppendMessage(nil, &Header{MsgType: []byte("X")}, nil)
	badField = bytes.Replace(badField, []byte("34=0"), []byte("34=z"), 1)
	badField = fixChecksum(badField)
	tooLarge := msg(6, 7, 6, make([]byte, 600))

	cases := []struct {
		name    string
		parts   [][]byte
		seqs    []uint64
		errs    []error
		skipped uint64
	}{
		{"garbage first", [][]byte{[]byte("xx8=STE"), good(1)}, []uint64{1}, []error{ErrGarbage}, 7},
		{"garbage between", [][]byte{good(1), []byte("hello 8=ST"), good(2)}, []uint64{1, 2}, []error{ErrGarbage}, 10},
		{"checksum", [][]byte{good(1), badSum, good(2)}, []uint64{1, 2}, []error{ErrChecksum}, uint64(len(badSum))},
		{"no trailer", [][]byte{good(1), noTrailer, good(2)}, []uint64{1, 2}, []error{ErrFraming}, uint64(len(noTrailer))},
		{"bad field", [][]byte{good(1), badField, good(2)}, []uint64{1, 2}, []error{ErrField}, uint64(len(badField))},
		{"too large", [][]byte{good(1), tooLarge, good(2)}, []uint64{1, 2}, []error{ErrTooLarge}, uint64(len(tooLarge))},
		{"bad body length", [][]byte{[]byte("8=STEP.1.0.0\x019=x\x01"), good(1)}, []uint64{1}, []error{ErrFraming}, 17},
	}
	for _, tc := range cases {
		stream := bytes.Join(tc.parts, nil)
		for _, size := range []int{1, 5, len(stream)} {
			p := NewParser(Config{MaxMessageSize: 512})
			g := feedChunks(t, p, stream, func() int { return size })
			if fmt.Sprint(g.seqs) != fmt.Sprint(tc.seqs) || len(g.errs) != len(tc.errs) {
				t.Fatalf("%s/%d: seqs %v errs %v", tc.name, size, g.seqs, g.errs)
			}
			for i, e := range tc.errs {
				var se *Error
				if !errors.Is(g.errs[i], e) || !errors.As(g.errs[i], &se) {
					t.Fatalf("%s/%d: err %v, want %v", tc.name, size, g.errs[i], e)
				}
			}
			if st := p.Stats(); st.SkippedBytes != tc.skipped {
				t.Fatalf("%s/%d: skipped %d, want %d", tc.name, size, st.SkippedBytes, tc.skipped)
			}
		}
	}
}

func fixChecksum(m []byte) []byte {
	sum := Checksum(m[:len(m)-7])
	copy(m[len(m)-4:], fmt.Sprintf("%03d", sum))
	return m
}

func TestGaps(t *testing.T) {
	var stream []byte
	for _, s := range []struct {
		cat uint32
		seq uint64
	}{{7, 1}, {58, 10}, {7, 2}, {7, 5}, {58, 11}, {58, 11}, {7, 6}, {0, 0}} {
		stream = append(stream, msg(1, s.cat, s.seq, nil)...)
	}
	p := NewParser(Config{})
	g := feedChunks(t, p, stream, func() int { return 13 })
	if want := "[7:3->5 58:12->11]"; fmt.Sprint(g.gaps) != want {
		t.Fatalf("gaps %v, want %s", g.gaps, want)
	}
	if st := p.Stats(); st.Gaps != 2 {
		t.Fatalf("stats %+v", st)
	}

	p = NewParser(Config{MaxCategories: 1})
	g = feedChunks(t, p, stream, func() int { return 1000 })
	if st := p.Stats(); fmt.Sprint(g.gaps) != "[7:3->5]" || st.UntrackedCategories != 3 {
		t.Fatalf("bounded: gaps %v stats %+v", g.gaps, st)
	}
}

func TestDiscontinuity(t *testing.T) {
	a, b, c := msg(1, 7, 1, []byte("aa")), msg(2, 7, 2, []byte("bb")), msg(3, 7, 3, []byte("cc"))
	p := NewParser(Config{})
	g := &got{}
	p.Feed(append(bytes.Clone(a), b[:10]...))
	drain(t, p, g)
	// b[10:20] is lost; the stream continues inside b.
	p.Discontinuity(10)
	p.Feed(append(bytes.Clone(b[20:]), c...))
	drain(t, p, g)
	// The caller reported the gap, so the bytes skipped up to the next
	// message are counted but not reported as garbage.
	if fmt.Sprint(g.seqs) != "[1 3]" || fmt.Sprint(g.gaps) != "[7:2->3]" || len(g.errs) != 0 {
		t.Fatalf("seqs %v gaps %v errs %v", g.seqs, g.gaps, g.errs)
	}
	if st, want := p.Stats(), uint64(10+len(b)-20); st.SkippedBytes != want {
		t.Fatalf("skipped %d, want %d", st.SkippedBytes, want)
	}
	p.Feed([]byte("garbage"))
	if m, err := p.Next(); m != nil || !errors.Is(err, ErrGarbage) {
		t.Fatalf("garbage after a message: %v, %v", m, err)
	} else if se := err.(*Error); se.Offset != int64(len(a)+len(b)+len(c)) {
		t.Fatalf("garbage offset %d, want %d", se.Offset, len(a)+len(b)+len(c))
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	var stream []byte
	for i := range 20 {
		stream = append(stream, msg(uint64(i), 7, uint64(i), make([]byte, 100+i))...)
	}
	p := NewParser(Config{})
	allocs := testing.AllocsPerRun(100, func() {
		for off := 0; off < len(stream); off += 97 {
			p.Feed(stream[off:min(off+97, len(stream))])
			for {
				m, err := p.Next()
				if m == nil && err == nil {
					break
				}
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per stream", allocs)
	}
	h := Header{MsgType: []byte("UA5801"), SeqNum: 9, HasCategory: true, Category: 58, CategorySeq: 3}
	buf := make([]byte, 0, 1024)
	if a := testing.AllocsPerRun(100, func() { AppendMessage(buf, &h, stream[:50]) }); a != 0 {
		t.Fatalf("AppendMessage: %v allocations", a)
	}
}

// TestParserHoldsBufferOnlyForATail: a parser between messages holds no
// buffer; one that keeps an unfinished message holds one that fits it,
// within MaxMessageSize, until the message is complete or dropped.
func TestParserHoldsBufferOnlyForATail(t *testing.T) {
	a, b := msg(1, 7, 1, make([]byte, 100)), msg(2, 7, 2, make([]byte, 3000))
	p := NewParser(Config{})
	drain := func() (n int) {
		for {
			m, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			if m == nil {
				return n
			}
			n++
		}
	}
	if p.Held() != 0 {
		t.Fatalf("new parser holds %d bytes", p.Held())
	}
	p.Feed(a)
	if n := drain(); n != 1 || p.Held() != 0 {
		t.Fatalf("whole message: %d returned, %d bytes held", n, p.Held())
	}
	p.Feed(b[:10]) // header unknown yet
	if n := drain(); n != 0 || p.Held() == 0 || p.Held() > 1024 {
		t.Fatalf("10 bytes of a message: %d returned, %d bytes held", n, p.Held())
	}
	p.Feed(b[10:2000])
	if n := drain(); n != 0 || p.Held() < len(b) || p.Held() > 2*len(b) {
		t.Fatalf("2000 bytes of a %d-byte message: %d returned, %d bytes held", len(b), n, p.Held())
	}
	p.Feed(append(b[2000:], a[:50]...))
	if n := drain(); n != 1 || p.Held() == 0 {
		t.Fatalf("end of a message and the start of the next: %d returned, %d bytes held", n, p.Held())
	}
	p.Discontinuity(7)
	if p.Held() != 0 {
		t.Fatalf("after a discontinuity: %d bytes held", p.Held())
	}
	small := NewParser(Config{MaxMessageSize: 1000})
	small.Feed(msg(1, 7, 1, make([]byte, 800))[:850])
	if m, err := small.Next(); m != nil || err != nil || small.Held() != 1000 {
		t.Fatalf("MaxMessageSize 1000: %v, %v, %d bytes held", m, err, small.Held())
	}
}

// FuzzSTEP feeds arbitrary bytes in arbitrary chunks: no panic, no hang,
// bounded buffer, every returned message re-encodes to a message that
// parses the same, and the same bytes in one chunk give the same messages.
func FuzzSTEP(f *testing.F) {
	f.Add(msg(1, 7, 1, []byte{0x80, 0x01, 0xff}), uint8(3))
	f.Add(append(msg(1, 7, 1, nil), msg(2, 58, 9, []byte("x"))...), uint8(1))
	f.Add([]byte("junk8=STEP.1.0.0\x019=5\x0135=A\x0110=000\x01"), uint8(7))
	reordered := bytes.Replace(msg(3, 7, 4, []byte{1, 0x81}), []byte("\x0149=VDE\x0156=VSS"), []byte("\x0156=VSS\x0149=VDE"), 1)
	f.Add(fixChecksum(reordered), uint8(9))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		size := int(chunk)%64 + 1
		whole := NewParser(Config{MaxMessageSize: 256})
		split := NewParser(Config{MaxMessageSize: 256})
		g1 := feedChunks(t, whole, data, func() int { return len(data) })
		g2 := feedChunks(t, split, data, func() int { return size })
		if fmt.Sprint(g1.payloads, g1.seqs, g1.gaps) != fmt.Sprint(g2.payloads, g2.seqs, g2.gaps) {
			t.Fatalf("chunking changes the result: %v vs %v", g1.seqs, g2.seqs)
		}
		if whole.Buffered() > 256 || split.Buffered() > 256 {
			t.Fatal("buffer over bound")
		}
		st := whole.Stats()
		if st.Bytes+st.SkippedBytes+uint64(whole.Buffered()) != uint64(len(data)) {
			t.Fatalf("bytes not accounted for: %+v, buffered %d, input %d", st, whole.Buffered(), len(data))
		}
	})
}

// BenchmarkParse measures framing alone: 100 messages of 600 payload bytes
// fed in 1408-byte chunks (checksum, fields, gap tracking, partial copies).
func BenchmarkParse(b *testing.B) {
	var stream []byte
	for i := range 100 {
		stream = append(stream, msg(uint64(i+1), 7, uint64(i+1), make([]byte, 600))...)
	}
	p := NewParser(Config{})
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for off := 0; off < len(stream); off += 1408 {
			p.Feed(stream[off:min(off+1408, len(stream))])
			for {
				m, err := p.Next()
				if err != nil {
					b.Fatal(err)
				}
				if m == nil {
					break
				}
			}
		}
	}
}

// TestChecksum checks Checksum with and without its vector loop on every
// length up to 300 and longer ones, random bytes and all-0xff (every lane
// carries).
func TestChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	sizes := make([]int, 0, 320)
	for n := range 300 {
		sizes = append(sizes, n)
	}
	// Around the lane-folding block (2048 bytes) and past several blocks.
	sizes = append(sizes, 1016, 1023, 1024, 1025, 1031, 2040, 2047, 2048, 2049, 2056, 4099, 70001)
	for _, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if n%7 == 0 || n > 300 {
			for i := range b {
				b[i] = 0xff // every lane carries
			}
		}
		checkChecksum(t, b)
	}
}

// checkChecksum compares Checksum(b), with the vector loop and without,
// with the byte sum modulo 256.
func checkChecksum(t *testing.T, b []byte) {
	t.Helper()
	want := 0
	for _, c := range b {
		want += int(c)
	}
	for _, vector := range []bool{true, false} {
		restore := setVector(vector)
		got := Checksum(b)
		restore()
		if got != want%256 {
			t.Fatalf("len %d, vector loop %v: Checksum %d, want %d", len(b), vector, got, want%256)
		}
	}
}

// TestBeginStringBound checks the bound on field 8: a begin string of
// maxBeginStringLen bytes is accepted, one byte more is a framing error, and
// a shorter run without SOH at the end of the input waits for more bytes.
func TestBeginStringBound(t *testing.T) {
	withBegin := func(n int) []byte {
		m := msg(1, 7, 1, []byte{0xc0, 0x99})
		begin := "STEP." + string(bytes.Repeat([]byte("9"), n-len("STEP.")))
		return fixChecksum(bytes.Replace(m, []byte(BeginString), []byte(begin), 1))
	}
	p := NewParser(Config{})
	p.Feed(withBegin(maxBeginStringLen))
	if m, err := p.Next(); err != nil || m == nil {
		t.Fatalf("begin string of %d bytes: %v, %v", maxBeginStringLen, m, err)
	}
	p.Feed(withBegin(maxBeginStringLen + 1))
	if _, err := p.Next(); !errors.Is(err, ErrFraming) {
		t.Fatalf("begin string of %d bytes: %v, want ErrFraming", maxBeginStringLen+1, err)
	}
	q := NewParser(Config{})
	q.Feed(withBegin(maxBeginStringLen)[:2+maxBeginStringLen])
	if m, err := q.Next(); m != nil || err != nil || q.Buffered() != 2+maxBeginStringLen {
		t.Fatalf("cut begin string: %v, %v, %d buffered", m, err, q.Buffered())
	}
}

// TestDigits checks the one-word number parser of the straight path against
// parseUint, on every length, digits and other bytes (those next to '0' and
// '9' included) at every position.
func TestDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	others := []byte{'/', ':', '=', SOH, 0, 0x80, 0xb0, 0xff, ' '}
	for range 200000 {
		var b [8]byte
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
			if r.IntN(30) == 0 {
				b[i] = others[r.IntN(len(others))]
			}
		}
		n := r.IntN(10)
		got, ok := digits(binary.LittleEndian.Uint64(b[:]), n)
		var want uint64
		wantOK := n >= 1 && n <= 8
		if wantOK {
			want, wantOK = parseUint(b[:n])
		}
		if ok != wantOK || ok && got != want {
			t.Fatalf("digits(%q, %d) = %d, %v; want %d, %v", b, n, got, ok, want, wantOK)
		}
	}
}

// TestFrameBodyLength checks frame's reading of the body length (field 9,
// read from one word when its SOH is in the next 8 bytes) against the rule
// written out plainly: 1 to 9 digits, then SOH, else a framing error that
// skips one byte; a length not ended yet needs more bytes, and a known
// length past the bytes there are says how many.
func TestFrameBodyLength(t *testing.T) {
	reference := func(v []byte) (total, skip int, err error) {
		i, n, nd := len(stdStart), 0, 0
		for ; i < len(v) && v[i] != SOH; i++ {
			if v[i] < '0' || v[i] > '9' || nd == maxBodyLenDigits {
				return 0, 1, ErrFraming
			}
			n, nd = n*10+int(v[i]-'0'), nd+1
		}
		switch {
		case i >= len(v):
			return 0, 0, nil
		case nd == 0:
			return 0, 1, ErrFraming
		case i+1+n+trailerLen > DefaultMaxMessageSize:
			return 0, 1, ErrTooLarge
		}
		return i + 1 + n + trailerLen, 0, nil
	}
	r := rand.New(rand.NewPCG(13, 14))
	chars := []byte("0123456789012345678901234567890123456789\x01\x01/:a ")
	for range 100000 {
		v := []byte(stdStart)
		for range r.IntN(13) {
			v = append(v, chars[r.IntN(len(chars))])
		}
		if r.IntN(2) == 0 {
			v = append(v, SOH)
		}
		if r.IntN(3) > 0 {
			v = append(v, "35=A\x01"...)
		}
		wantTotal, wantSkip, wantErr := reference(v)
		total, _, skip, err := frame(v, DefaultMaxMessageSize)
		if wantTotal > 0 && wantTotal <= len(v) {
			continue // a complete message: the trailer decides (other tests)
		}
		if total != wantTotal || skip != wantSkip || err != wantErr {
			t.Fatalf("%q: total %d, skip %d, %v; want %d, %d, %v", v, total, skip, err, wantTotal, wantSkip, wantErr)
		}
	}
}

// TestStraightPathTaken checks that finishStd takes AppendMessage's
// messages with raw data, short and long (its zero-padded copy and its
// in-place view), with sequence numbers of up to 8 digits and longer.
func TestStraightPathTaken(t *testing.T) {
	for _, n := range []int{1, 40, 300} {
		for _, seq := range []uint64{1, 12345678, 123456789012} {
			m := msg(seq, 7, seq, bytes.Repeat([]byte{0x81}, n))
			_, body, _, err := frame(m, len(m))
			if err != nil {
				t.Fatal(err)
			}
			var got Message
			if !finishStd(&got, m[:len(m)-trailerLen], body) || got.SeqNum != seq || got.CategorySeq != seq || len(got.Payload) != n {
				t.Fatalf("payload %d, seq %d: straight path not taken or wrong: %+v", n, seq, got)
			}
		}
	}
}

// TestSOHMask checks the SOH bitmap of the straight path, with and without
// its vector code, against a byte loop (bytes next to SOH included).
func TestSOHMask(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	near := []byte{SOH, SOH, 0, 2, 0x81, 0xff, 0x80, '='}
	for range 20000 {
		var b [128]byte
		for i := range b {
			b[i] = byte(r.IntN(256))
			if r.IntN(3) == 0 {
				b[i] = near[r.IntN(len(near))]
			}
		}
		var wantLo, wantHi uint64
		for i, c := range b {
			if c == SOH {
				if i < 64 {
					wantLo |= 1 << i
				} else {
					wantHi |= 1 << (i - 64)
				}
			}
		}
		for _, vector := range []bool{true, false} {
			restore := setVector(vector)
			lo, hi := sohMask(&b)
			restore()
			if lo != wantLo || hi != wantHi {
				t.Fatalf("vector %v: %x %x, want %x %x", vector, lo, hi, wantLo, wantHi)
			}
		}
	}
}
