// Package step frames and unframes STEP messages, the tag=value envelope
// (FIX-like, fields separated by SOH, 0x01) in which the Shanghai Stock
// Exchange sends its FAST Level-2 records.
//
// A STEP message looks like this (| stands for SOH):
//
//	8=STEP.1.0.0|9=<body length>|35=UA3201|49=VDE|56=VSS|34=<seq>|52=<time>|
//	10142=<category>|10072=<per-category seq>|95=<n>|96=<n FAST bytes>|10=<checksum>|
//
// The body length (9) counts the bytes after the SOH that ends field 9 up to
// and including the SOH before "10=". The checksum (10) is the sum of every
// byte before "10=", modulo 256, written as three digits. Field 96 is raw
// data: it may contain SOH bytes, so its length comes from field 95.
//
// A Parser takes a TCP byte stream in chunks of any size and yields complete,
// verified messages without allocating:
//
//	p := step.NewParser(step.Config{})
//	for chunk := range chunks {
//		p.Feed(chunk)
//		for {
//			m, err := p.Next()
//			if err != nil {
//				log.Print(err) // counted in p.Stats(); the parser resynchronises by itself
//				continue
//			}
//			if m == nil {
//				break // needs the next chunk
//			}
//			use(m.Payload)
//		}
//	}
//
// AppendMessage is the matching encoder, for feed generators and tests.
package step

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// SOH separates STEP fields.
const SOH = 0x01

// BeginString is the value of field 8 that AppendMessage writes.
const BeginString = "STEP.1.0.0"

// syncMarker starts every STEP message; the parser resynchronises on it.
const syncMarker = "8=STEP"

// Tags the parser understands. Other tags are skipped.
const (
	TagBeginString   = 8
	TagBodyLength    = 9
	TagCheckSum      = 10
	TagMsgSeqNum     = 34
	TagMsgType       = 35
	TagSenderCompID  = 49
	TagSendingTime   = 52
	TagTargetCompID  = 56
	TagRawDataLength = 95
	TagRawData       = 96
	TagCategory      = 10142
	TagCategorySeq   = 10072
)

// DefaultMaxMessageSize is the default bound on one whole STEP message,
// header and checksum included. SSE messages carry one FAST message of a few
// kilobytes at most.
const DefaultMaxMessageSize = 64 << 10

// DefaultMaxCategories is the default number of distinct categories (10142)
// whose sequence numbers are tracked for gap detection.
const DefaultMaxCategories = 64

// maxHeaderLen bounds "8=<begin string>|9=<digits>|". A begin string longer
// than 24 bytes or a body length with more than 9 digits is a framing error.
const (
	maxBeginStringLen = 24
	maxBodyLenDigits  = 9
	maxHeaderLen      = 2 + maxBeginStringLen + 1 + 2 + maxBodyLenDigits + 1
	trailerLen        = len("10=000") + 1
)

// Sentinel errors, wrapped in *Error.
var (
	// ErrGarbage: bytes that do not start a STEP message. The parser skips
	// to the next "8=STEP".
	ErrGarbage = errors.New("step: garbage before message start")
	// ErrFraming: the header or trailer is malformed (bad body length, no
	// "10=" where the body length says). The parser resynchronises.
	ErrFraming = errors.New("step: malformed framing")
	// ErrTooLarge: the body length makes the message longer than
	// Config.MaxMessageSize. The parser resynchronises.
	ErrTooLarge = errors.New("step: message too large")
	// ErrChecksum: the checksum does not match. The message is skipped.
	ErrChecksum = errors.New("step: checksum mismatch")
	// ErrField: a field inside a correctly framed message is malformed
	// (no '=', a non-numeric value in a numeric field, 96 without 95, raw
	// data running past the body). The message is skipped.
	ErrField = errors.New("step: malformed field")
)

// Error describes a STEP stream error. Offset is the stream offset (bytes
// fed since the parser was created or Reset) of the message or garbage run.
type Error struct {
	Offset int64
	Tag    int // the offending tag for ErrField, 0 otherwise
	Err    error
}

func (e *Error) Error() string {
	if e.Tag != 0 {
		return fmt.Sprintf("%v: tag %d at stream offset %d", e.Err, e.Tag, e.Offset)
	}
	return fmt.Sprintf("%v at stream offset %d", e.Err, e.Offset)
}

func (e *Error) Unwrap() error { return e.Err }

// Config bounds a Parser. The zero value selects the defaults.
type Config struct {
	// MaxMessageSize bounds one STEP message in bytes, and so the
	// parser's internal buffer. Default DefaultMaxMessageSize.
	MaxMessageSize int
	// MaxCategories bounds how many categories are tracked for gap
	// detection; messages of further categories are counted in
	// Stats.UntrackedCategories and never reported as gaps.
	// Default DefaultMaxCategories.
	MaxCategories int
}

// Message is one verified STEP message. Its byte slices alias the parser's
// input or internal buffer: they are valid until the next call to Next, Feed
// or Reset on the parser that returned it.
type Message struct {
	// Raw is the whole message, "8=" through the checksum's SOH.
	Raw []byte
	// Offset is the stream offset of Raw[0].
	Offset int64

	MsgType      []byte // 35, e.g. "UA3201"
	SenderCompID []byte // 49
	TargetCompID []byte // 56
	SendingTime  []byte // 52, e.g. "20260105-09:30:00.000" as sent
	SeqNum       uint64 // 34; 0 when absent
	// Category is field 10142; HasCategory says whether it was present.
	Category    uint32
	HasCategory bool
	// CategorySeq is field 10072, the per-category sequence number.
	CategorySeq    uint64
	HasCategorySeq bool
	// Payload is the raw data of field 96 (length from 95): for SSE, one
	// FAST message holding one or more records. Empty when absent.
	Payload []byte

	// Gap reports a break in the per-category sequence: this message
	// should have carried ExpectedSeq. Only set when both 10142 and 10072
	// are present and an earlier message of the same category was seen.
	// A lower number than expected (a replay or a restart) is a gap too.
	Gap         bool
	ExpectedSeq uint64
}

// Stats counts what a Parser has seen. Every bound hit is counted here.
type Stats struct {
	Messages            uint64 // verified messages returned by Next
	Bytes               uint64 // bytes of those messages
	SkippedBytes        uint64 // bytes dropped while resynchronising or in rejected messages
	Resyncs             uint64 // garbage runs and framing errors
	TooLarge            uint64 // messages over MaxMessageSize
	ChecksumErrors      uint64
	FieldErrors         uint64
	Gaps                uint64 // messages with Gap set
	UntrackedCategories uint64 // messages whose category did not fit MaxCategories
}

type categorySeq struct {
	category uint32
	last     uint64
}

// Parser splits a STEP byte stream into messages. It does NOT take ownership
// of the chunks passed to Feed: it reads them until Next returns (nil, nil)
// and copies only the unfinished tail of a chunk into its internal buffer.
// The parser holds that buffer only while it keeps such a tail: it takes it
// from a pool shared by all parsers, in sizes of powers of two from 512
// bytes up to MaxMessageSize, grows it as the tail does, and gives it back
// when the tail is consumed (Held tells its size). A parser between
// messages thus holds no buffer, and steady-state parsing allocates
// nothing.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	cfg   Config
	buf   []byte  // the start of an unfinished message; precedes in in the stream
	bufp  *[]byte // buf's pool entry, nil when buf is nil or not pooled
	in    []byte  // the rest of the chunk passed to Feed
	inOff int64   // stream offset of in[0]
	drop  int     // bytes of buf to drop on the next call (the last message returned)

	resyncing bool
	// pending is the total length of the message buf starts, once frame
	// has read its header (0 otherwise): the bytes it still needs are
	// taken from the next chunk without reading the header again.
	pending int
	msg     Message
	cats    []categorySeq
	stats   Stats
}

// NewParser returns a parser with the bounds in cfg.
func NewParser(cfg Config) *Parser {
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	if cfg.MaxMessageSize < maxHeaderLen+trailerLen {
		cfg.MaxMessageSize = maxHeaderLen + trailerLen
	}
	if cfg.MaxCategories <= 0 {
		cfg.MaxCategories = DefaultMaxCategories
	}
	return &Parser{cfg: cfg}
}

// Pooled buffer sizes: powers of two from 1<<minBufShift to
// 1<<maxBufShift bytes.
const (
	minBufShift = 9
	maxBufShift = 24
)

// bufPools holds free parser buffers by size, as *[]byte of length 0.
var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// reserve makes room in the buffer for n bytes in all, keeping its
// contents; n is at most MaxMessageSize.
func (p *Parser) reserve(n int) {
	if cap(p.buf) >= n {
		return
	}
	shift := max(bits.Len(uint(n-1)), minBufShift)
	var bp *[]byte
	switch {
	case shift > maxBufShift || 1<<shift > p.cfg.MaxMessageSize:
		b := make([]byte, 0, max(n, p.cfg.MaxMessageSize))
		bp = &b
	default:
		if v := bufPools[shift-minBufShift].Get(); v != nil {
			bp = v.(*[]byte)
		} else {
			b := make([]byte, 0, 1<<shift)
			bp = &b
		}
	}
	*bp = append(*bp, p.buf...)
	p.release()
	p.buf, p.bufp = *bp, bp
}

// release gives the buffer back to its pool.
func (p *Parser) release() {
	if bp := p.bufp; bp != nil {
		*bp = (*bp)[:0]
		if c := cap(*bp); c&(c-1) == 0 && c >= 1<<minBufShift && c <= 1<<maxBufShift {
			bufPools[bits.Len(uint(c))-1-minBufShift].Put(bp)
		}
	}
	p.buf, p.bufp = nil, nil
}

// Held returns the size in bytes of the internal buffer the parser holds:
// 0 between messages, else at most MaxMessageSize.
func (p *Parser) Held() int { return cap(p.buf) }

// Feed hands the parser the next chunk of the stream. The parser does NOT
// take ownership of chunk, but reads it until Next returns (nil, nil); call
// Feed again only then. Bytes of an earlier chunk not yet consumed are lost
// if Feed is called early (they are counted as skipped).
func (p *Parser) Feed(chunk []byte) {
	p.dropReturned()
	if len(p.in) > 0 {
		p.stats.SkippedBytes += uint64(len(p.in))
	}
	p.inOff += int64(len(p.in))
	p.in = chunk
}

// Discontinuity tells the parser that bytes are missing from the stream
// before the next chunk (a TCP gap): the unfinished message is dropped and
// the parser resynchronises on the next "8=STEP". Sequence tracking is kept,
// so the next message reports the gap. skipped is the number of missing
// bytes, used only to keep stream offsets right.
func (p *Parser) Discontinuity(skipped int64) {
	p.dropReturned()
	p.stats.SkippedBytes += uint64(len(p.buf) + len(p.in))
	p.inOff += int64(len(p.in)) + skipped
	p.release()
	p.in = nil
	p.pending = 0
	p.resyncing = true
}

// Reset forgets all state (buffered bytes, sequence numbers, stream offset)
// but keeps the counters.
func (p *Parser) Reset() {
	p.release()
	p.in = nil
	p.inOff = 0
	p.drop = 0
	p.pending = 0
	p.resyncing = false
	p.cats = p.cats[:0]
}

// Buffered returns the number of bytes of an unfinished message held in the
// internal buffer.
func (p *Parser) Buffered() int { return len(p.buf) }

// Stats returns the counters.
func (p *Parser) Stats() Stats { return p.stats }

// dropReturned forgets the message returned last from the buffer, and the
// buffer once it is empty.
func (p *Parser) dropReturned() {
	if p.drop > 0 {
		p.buf = p.buf[:copy(p.buf, p.buf[p.drop:])]
		p.drop = 0
		if len(p.buf) == 0 {
			p.release()
		}
	}
}

// Next returns the next complete message, (nil, nil) when the parser needs
// another chunk, or (nil, err) for a rejected message or a garbage run, after
// which the caller keeps calling Next: the parser has already skipped the bad
// bytes. The returned message is valid until the next call to Next, Feed or
// Reset.
func (p *Parser) Next() (*Message, error) {
	p.dropReturned()
	for {
		if len(p.buf) == 0 {
			if len(p.in) == 0 {
				return nil, nil
			}
			total, body, skip, err := frame(p.in, p.cfg.MaxMessageSize)
			if skip > 0 {
				off := p.inOff
				p.in = p.in[skip:]
				p.inOff += int64(skip)
				if e := p.skipped(skip, off, err); e != nil {
					return nil, e
				}
				continue
			}
			if total == 0 || total > len(p.in) {
				// Unfinished: fits the buffer because frame checked
				// total (or the header length) against the bound.
				p.reserve(max(total, len(p.in)))
				p.buf = append(p.buf, p.in...)
				p.inOff += int64(len(p.in))
				p.in = nil
				p.pending = total
				return nil, nil
			}
			raw := p.in[:total]
			off := p.inOff
			p.in = p.in[total:]
			p.inOff += int64(total)
			return p.finish(raw, body, off)
		}

		if p.pending > len(p.buf) {
			if len(p.in) == 0 {
				return nil, nil
			}
			want := min(p.pending-len(p.buf), len(p.in))
			p.reserve(p.pending)
			p.buf = append(p.buf, p.in[:want]...)
			p.in = p.in[want:]
			p.inOff += int64(want)
			if len(p.buf) < p.pending {
				return nil, nil
			}
		}
		p.pending = 0
		total, body, skip, err := frame(p.buf, p.cfg.MaxMessageSize)
		bufOff := p.inOff - int64(len(p.buf))
		if skip > 0 {
			p.buf = p.buf[:copy(p.buf, p.buf[skip:])]
			if len(p.buf) == 0 {
				p.release()
			}
			if e := p.skipped(skip, bufOff, err); e != nil {
				return nil, e
			}
			continue
		}
		if total > 0 && total <= len(p.buf) {
			p.drop = total
			return p.finish(p.buf[:total], body, bufOff)
		}
		if len(p.in) == 0 {
			return nil, nil
		}
		want := maxHeaderLen - len(p.buf) // header still unknown
		if total > 0 {
			want = total - len(p.buf)
		}
		want = max(min(want, len(p.in)), 1)
		p.reserve(max(total, len(p.buf)+want))
		p.buf = append(p.buf, p.in[:want]...)
		p.in = p.in[want:]
		p.inOff += int64(want)
	}
}

// skipped accounts for skip dropped bytes and returns the error to report,
// or nil while an already reported resynchronisation continues.
func (p *Parser) skipped(skip int, off int64, err error) error {
	p.stats.SkippedBytes += uint64(skip)
	switch err {
	case ErrChecksum:
		p.stats.ChecksumErrors++
		p.resyncing = false
		return &Error{Offset: off, Err: err}
	case ErrTooLarge:
		p.stats.TooLarge++
	}
	if p.resyncing {
		return nil
	}
	p.resyncing = true
	p.stats.Resyncs++
	return &Error{Offset: off, Err: err}
}

// frame examines the start of v. It returns the total length of the message
// at v[0] once the header is known (0 while it is not), or skip > 0 with the
// reason when v[:skip] must be dropped. A message is only accepted (total
// > 0, skip == 0, total <= len(v)) when its trailer is well formed and its
// checksum matches.
func frame(v []byte, maxSize int) (total, body, skip int, err error) {
	var i int // offset of the body length's digits
	if len(v) >= 16 && binary.LittleEndian.Uint64(v) == stdStart0 &&
		binary.LittleEndian.Uint64(v[8:])&0x00ffffffffffffff == stdStart1 {
		i = len(stdStart) // the begin string AppendMessage writes
	} else if i, skip, err = frameStart(v); i == 0 {
		return 0, 0, skip, err
	}
	bodyLen, nd := 0, 0
	for ; i < len(v) && v[i] != SOH; i++ {
		c := v[i]
		if c < '0' || c > '9' || nd == maxBodyLenDigits {
			return 0, 0, 1, ErrFraming
		}
		bodyLen = bodyLen*10 + int(c-'0')
		nd++
	}
	if i >= len(v) {
		return 0, 0, 0, nil
	}
	if nd == 0 {
		return 0, 0, 1, ErrFraming
	}
	i++
	total = i + bodyLen + trailerLen
	if total > maxSize {
		return 0, 0, 1, ErrTooLarge
	}
	if total > len(v) {
		return total, i, 0, nil
	}
	t := v[total-trailerLen : total]
	if t[0] != '1' || t[1] != '0' || t[2] != '=' || t[6] != SOH ||
		!isDigit(t[3]) || !isDigit(t[4]) || !isDigit(t[5]) {
		return 0, 0, 1, ErrFraming
	}
	want := int(t[3]-'0')*100 + int(t[4]-'0')*10 + int(t[5]-'0')
	if Checksum(v[:total-trailerLen]) != want {
		return 0, 0, total, ErrChecksum
	}
	return total, i, 0, nil
}

// stdStart is how a message with the begin string BeginString starts, up to
// the body length's digits; stdStart0 and stdStart1 are its first 8 and next
// 7 bytes as little-endian words.
const (
	stdStart  = "8=" + BeginString + "\x019="
	stdStart0 = uint64('8') | uint64('=')<<8 | uint64('S')<<16 | uint64('T')<<24 |
		uint64('E')<<32 | uint64('P')<<40 | uint64('.')<<48 | uint64('1')<<56
	stdStart1 = uint64('.') | uint64('0')<<8 | uint64('.')<<16 | uint64('0')<<24 |
		uint64(SOH)<<32 | uint64('9')<<40 | uint64('=')<<48
)

// frameStart examines the start of v up to the body length: "8=", a begin
// string starting "STEP", SOH, "9=". It returns the offset of the body
// length's digits, or 0 with skip > 0 and the reason when v[:skip] must be
// dropped, or 0, 0, nil while v is too short to tell.
func frameStart(v []byte) (i, skip int, err error) {
	if !bytes.HasPrefix(v, []byte(syncMarker)) {
		if len(v) < len(syncMarker) && bytes.HasPrefix([]byte(syncMarker), v) {
			return 0, 0, nil
		}
		return 0, garbageLen(v), ErrGarbage
	}
	begin := v[2:min(len(v), 2+maxBeginStringLen+1)]
	i = bytes.IndexByte(begin, SOH)
	if i < 0 {
		if len(begin) > maxBeginStringLen {
			return 0, 1, ErrFraming
		}
		return 0, 0, nil
	}
	i += 2 + 1
	if len(v) < i+2 {
		if bytes.HasPrefix([]byte("9="), v[i:]) {
			return 0, 0, nil
		}
		return 0, 1, ErrFraming
	}
	if v[i] != '9' || v[i+1] != '=' {
		return 0, 1, ErrFraming
	}
	return i + 2, 0, nil
}

// garbageLen returns how many leading bytes of v cannot start a message:
// up to the next "8=STEP", or up to a tail that may be the start of one.
func garbageLen(v []byte) int {
	if i := bytes.Index(v[1:], []byte(syncMarker)); i >= 0 {
		return i + 1
	}
	for k := min(len(syncMarker)-1, len(v)-1); k > 0; k-- {
		if bytes.HasPrefix([]byte(syncMarker), v[len(v)-k:]) {
			return len(v) - k
		}
	}
	return len(v)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Checksum returns the STEP/FIX checksum of b: the sum of its bytes modulo 256.
// On amd64 with AVX2 a buffer of 32 bytes or more is summed by a vector
// loop (checksum_amd64.s, its last bytes from one masked load); shorter
// ones, and every buffer elsewhere, as below.
func Checksum(b []byte) int {
	// Eight bytes at a time, two sums per block of words: all, the words
	// themselves, and evens, their even bytes in 16-bit lanes (which do not
	// carry into each other within checksumBlock words). all-evens is then
	// the odd bytes' sums, in lanes one byte up. Only the low byte of each
	// lane counts modulo 256; the lanes are added with one multiplication.
	const even = 0x00ff00ff00ff00ff
	sum, n := vectorSum(b)
	if n > 0 {
		return int(sum & 0xff) // the vector loop summed all of b
	}
	for len(b) >= 8 {
		n := min(len(b)>>3, checksumBlock) << 3
		blk := b[:n]
		b = b[n:]
		var all, evens uint64
		for len(blk) >= 32 {
			w0 := binary.LittleEndian.Uint64(blk)
			w1 := binary.LittleEndian.Uint64(blk[8:])
			w2 := binary.LittleEndian.Uint64(blk[16:])
			w3 := binary.LittleEndian.Uint64(blk[24:])
			all += w0 + w1 + w2 + w3
			evens += w0&even + w1&even + w2&even + w3&even
			blk = blk[32:]
		}
		for len(blk) >= 8 {
			w := binary.LittleEndian.Uint64(blk)
			all += w
			evens += w & even
			blk = blk[8:]
		}
		odds := (all - evens) >> 8
		sum += (evens&even + odds&even) * 0x0001000100010001 >> 48
	}
	for _, c := range b {
		sum += uint64(c)
	}
	return int(sum & 0xff)
}

// checksumBlock bounds the words Checksum adds before folding their sums:
// a 16-bit lane of evens takes at most 255 per word, so 256 words stay
// below 1<<16.
const checksumBlock = 256

// finish parses the fields of a framed, checksummed message whose body
// (after "8=...|9=...|") starts at raw[i].
func (p *Parser) finish(raw []byte, i int, off int64) (*Message, error) {
	m := &p.msg
	// finishStd sets every other field when it succeeds.
	m.Raw, m.Offset, m.Gap, m.ExpectedSeq = raw, off, false, 0
	end := len(raw) - trailerLen
	hdr := raw[:end] // every field ends before the trailer
	if !finishStd(m, hdr, i) {
		*m = Message{Raw: raw, Offset: off}
		if tag, ok := parseFields(m, hdr, i); !ok {
			return p.fieldError(off, tag)
		}
	}
	return p.accept(m)
}

// parseFields parses the fields of hdr from hdr[i] on into m, in any order;
// it returns the tag of a malformed field and false.
func parseFields(m *Message, hdr []byte, i int) (badTag int, ok bool) {
	raw := m.Raw
	rawLen := -1
	for i < len(hdr) {
		tag, j := 0, i
		if c0, c1 := hdr[i]-'0', byte(0); c0 <= 9 && i+2 < len(hdr) && hdr[i+2] == '=' {
			// Most header tags have two digits.
			if c1 = hdr[i+1] - '0'; c1 <= 9 {
				tag, j = int(c0)*10+int(c1), i+2
			}
		}
		if j == i {
			for lim := min(i+9, len(hdr)); j < lim; j++ {
				c := hdr[j] - '0'
				if c > 9 {
					break
				}
				tag = tag*10 + int(c)
			}
			if j == i || j >= len(hdr) || hdr[j] != '=' {
				return tag, false
			}
		}
		j++
		if tag == TagRawData {
			if rawLen < 0 || j+rawLen >= len(hdr) || hdr[j+rawLen] != SOH {
				return tag, false
			}
			m.Payload = hdr[j : j+rawLen]
			i = j + rawLen + 1
			continue
		}
		// Header values are a few bytes long: eight bytes at a time, the
		// first SOH found by a zero-byte test.
		k := j
		for ; k+8 <= len(hdr); k += 8 {
			if z := zeroBytes(binary.LittleEndian.Uint64(hdr[k:]) ^ 0x0101010101010101); z != 0 {
				k += bits.TrailingZeros64(z) >> 3
				goto found
			}
		}
		for k < len(hdr) && hdr[k] != SOH {
			k++
		}
		if k >= len(hdr) {
			return tag, false
		}
	found:
		val := hdr[j:k]
		i = k + 1
		var ok bool
		switch tag {
		case TagMsgType:
			m.MsgType, ok = val, true
		case TagSenderCompID:
			m.SenderCompID, ok = val, true
		case TagTargetCompID:
			m.TargetCompID, ok = val, true
		case TagSendingTime:
			m.SendingTime, ok = val, true
		case TagMsgSeqNum:
			m.SeqNum, ok = parseUint(val)
		case TagCategory:
			var c uint64
			c, ok = parseUint(val)
			ok = ok && c <= 0xffffffff
			m.Category, m.HasCategory = uint32(c), true
		case TagCategorySeq:
			m.CategorySeq, ok = parseUint(val)
			m.HasCategorySeq = true
		case TagRawDataLength:
			var n uint64
			n, ok = parseUint(val)
			ok = ok && n < uint64(len(raw))
			rawLen = int(n)
		default:
			ok = true
		}
		if !ok {
			return tag, false
		}
	}
	return 0, true
}

// accept counts m, a verified message, and checks its sequence.
func (p *Parser) accept(m *Message) (*Message, error) {
	p.resyncing = false
	p.trackGap(m)
	p.stats.Messages++
	p.stats.Bytes += uint64(len(m.Raw))
	return m, nil
}

// Tags with their '=' as little-endian words, for finishStd.
const (
	eq35    = uint64('3') | uint64('5')<<8 | uint64('=')<<16
	eq49    = uint64('4') | uint64('9')<<8 | uint64('=')<<16
	eq56    = uint64('5') | uint64('6')<<8 | uint64('=')<<16
	eq34    = uint64('3') | uint64('4')<<8 | uint64('=')<<16
	eq52    = uint64('5') | uint64('2')<<8 | uint64('=')<<16
	eq10142 = uint64('1') | uint64('0')<<8 | uint64('1')<<16 | uint64('4')<<24 | uint64('2')<<32 | uint64('=')<<40
	eq10072 = uint64('1') | uint64('0')<<8 | uint64('0')<<16 | uint64('7')<<24 | uint64('2')<<32 | uint64('=')<<40
	eq95    = uint64('9') | uint64('5')<<8 | uint64('=')<<16
	eq96    = uint64('9') | uint64('6')<<8 | uint64('=')<<16
)

// stdHead bounds the bytes finishStd reads before the raw data (the fields
// 35 to 95 and "96="; about 100 bytes in SSE's messages). It reads them from
// an array of stdHead+8 bytes (the message's own bytes, or a zero-padded
// copy when fewer remain), so offsets masked into it need no bounds checks.
const stdHead = 128

// stdBytes is finishStd's view of a body.
type stdBytes = [stdHead + 8]byte

// finishStd parses a body laid out as AppendMessage writes it with every
// field present (35, 49, 56, 34, 52, 10142, 10072, 95, 96, in this order,
// the raw data last), one word compare per tag and no loop over fields (the
// same branches in the same order for every message). It returns false for
// any other body, with m partly set: the general loop then decides.
func finishStd(m *Message, hdr []byte, i int) bool {
	var c stdCursor
	if len(hdr)-i >= len(stdBytes{}) {
		c.h = (*stdBytes)(hdr[i:])
	} else {
		var pad stdBytes
		copy(pad[:], hdr[i:])
		c.h = &pad
	}
	c.lo, c.hi = sohMask((*[stdHead]byte)(c.h[:stdHead]))
	c, s, e, ok := c.field(eq35, 3)
	if !ok {
		return false
	}
	m.MsgType = hdr[i+s : i+e]
	if c, s, e, ok = c.field(eq49, 3); !ok {
		return false
	}
	m.SenderCompID = hdr[i+s : i+e]
	if c, s, e, ok = c.field(eq56, 3); !ok {
		return false
	}
	m.TargetCompID = hdr[i+s : i+e]
	if c, s, e, ok = c.field(eq34, 3); !ok {
		return false
	}
	if m.SeqNum, ok = digits(stdWord(c.h, s), e-s); !ok {
		if m.SeqNum, ok = parseUint(hdr[i+s : i+e]); !ok {
			return false
		}
	}
	if c, s, e, ok = c.field(eq52, 3); !ok {
		return false
	}
	m.SendingTime = hdr[i+s : i+e]
	if c, s, e, ok = c.field(eq10142, 6); !ok {
		return false
	}
	n, ok := digits(stdWord(c.h, s), e-s)
	if !ok {
		n, ok = parseUint(hdr[i+s : i+e])
	}
	if !ok || n > 0xffffffff {
		return false
	}
	m.Category, m.HasCategory = uint32(n), true
	if c, s, e, ok = c.field(eq10072, 6); !ok {
		return false
	}
	if m.CategorySeq, ok = digits(stdWord(c.h, s), e-s); !ok {
		if m.CategorySeq, ok = parseUint(hdr[i+s : i+e]); !ok {
			return false
		}
	}
	m.HasCategorySeq = true
	if c, s, e, ok = c.field(eq95, 3); !ok {
		return false
	}
	if n, ok = digits(stdWord(c.h, s), e-s); !ok {
		if n, ok = parseUint(hdr[i+s : i+e]); !ok {
			return false
		}
	}
	// The raw data must end the body, its SOH the body's last byte.
	raw := i + e + 1 + 3 // the raw data's first byte
	if e+1 >= stdHead || binary.LittleEndian.Uint32(c.h[(e+1)&(stdHead-1):])&0xffffff != uint32(eq96) ||
		n != uint64(len(hdr)-raw-1) || hdr[len(hdr)-1] != SOH {
		return false
	}
	m.Payload = hdr[raw : len(hdr)-1]
	return true
}

// stdCursor walks finishStd's fields: h holds the bytes, lo and hi the SOH
// bytes of h[0:stdHead] not yet taken (bit i for h[i], lo for the first 64),
// p the offset of the next field.
type stdCursor struct {
	h      *stdBytes
	lo, hi uint64
	p      int
}

// field checks that the next field starts with the plen bytes of eq (its
// tag and '=') and returns the cursor past it and the offsets in h of its
// value and of the SOH that ends it: the next SOH, as every one before p
// ended an earlier field. ok is false when the field does not match or does
// not end in h[0:stdHead]. The cursor is passed and returned by value (four
// words), so that finishStd keeps it in registers: through a pointer it
// lived on the stack, loaded and stored back for every field.
func (c stdCursor) field(eq uint64, plen int) (next stdCursor, start, end int, ok bool) {
	if c.lo != 0 {
		end = bits.TrailingZeros64(c.lo)
		c.lo &= c.lo - 1
	} else {
		end = 64 + bits.TrailingZeros64(c.hi) // stdHead when none is left
		c.hi &= c.hi - 1
	}
	p := c.p
	c.p = end + 1
	// A SOH inside the tag makes the comparison fail (eq has none).
	ok = end < stdHead && binary.LittleEndian.Uint64(c.h[p&(stdHead-1):])&(1<<(uint(plen)*8&63)-1) == eq
	return c, p + plen, end, ok
}

// sohMaskGo is sohMask without vector instructions: an exact zero-byte test
// of each word XOR 0x01..., its top bits gathered into a byte by one
// multiplication.
func sohMaskGo(h *[stdHead]byte) (lo, hi uint64) {
	const low7, top, gather = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080, 0x0002040810204081
	for k := 0; k < 8; k++ {
		x := binary.LittleEndian.Uint64(h[8*k:]) ^ 0x0101010101010101
		lo |= ^((x&low7 + low7) | x) & top * gather >> 56 << (8 * k)
		y := binary.LittleEndian.Uint64(h[64+8*k:]) ^ 0x0101010101010101
		hi |= ^((y&low7 + low7) | y) & top * gather >> 56 << (8 * k)
	}
	return lo, hi
}

// stdWord returns the 8 bytes of h from h[start] on (start masked into
// h[0:stdHead]) as a little-endian word. finishStd parses a number of up to
// 8 digits from it (digits, inlined) and only a longer one (or a bad one)
// with parseUint: a function doing both was not inlined and cost a call per
// number.
func stdWord(h *stdBytes, start int) uint64 {
	return binary.LittleEndian.Uint64(h[start&(stdHead-1):])
}

// digits returns the number written by the n ASCII digits in the low bytes
// of w (first digit lowest) and true, or false when n is not in [1, 8] or
// one of them is not a digit. The digits are moved to the top of the word
// (the bytes below become leading zeros) and checked all at once (a digit's
// value plus 0x76 stays below 0x80), then joined by pairs, quads and halves
// with one multiplication each.
func digits(w uint64, n int) (uint64, bool) {
	if n < 1 || n > 8 {
		return 0, false
	}
	d := (w ^ 0x3030303030303030) << (uint(64-8*n) & 63)
	if (d|(d+0x7676767676767676))&0x8080808080808080 != 0 {
		return 0, false
	}
	d = d * (10<<8 + 1) >> 8 & 0x00ff00ff00ff00ff
	d = d * (100<<16 + 1) >> 16 & 0x0000ffff0000ffff
	return d * (10000<<32 + 1) >> 32, true
}

func (p *Parser) fieldError(off int64, tag int) (*Message, error) {
	p.stats.FieldErrors++
	p.stats.SkippedBytes += uint64(len(p.msg.Raw))
	p.msg = Message{}
	p.resyncing = false
	return nil, &Error{Offset: off, Tag: tag, Err: ErrField}
}

func (p *Parser) trackGap(m *Message) {
	if !m.HasCategory || !m.HasCategorySeq {
		return
	}
	for i := range p.cats {
		c := &p.cats[i]
		if c.category == m.Category {
			if m.CategorySeq != c.last+1 {
				m.Gap, m.ExpectedSeq = true, c.last+1
				p.stats.Gaps++
			}
			c.last = m.CategorySeq
			return
		}
	}
	if len(p.cats) == p.cfg.MaxCategories {
		p.stats.UntrackedCategories++
		return
	}
	p.cats = append(p.cats, categorySeq{category: m.Category, last: m.CategorySeq})
}

// zeroBytes has the top bit of the first zero byte of x set (and maybe of
// bytes after it, never before it).
func zeroBytes(x uint64) uint64 {
	return (x - 0x0101010101010101) &^ x & 0x8080808080808080
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}
