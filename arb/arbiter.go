package arb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults and bounds of Config.
const (
	DefaultLines      = 2
	MaxLines          = 64
	DefaultGapTimeout = 100 * time.Millisecond
	DefaultWindow     = 1024
	MaxWindow         = 1 << 16
	DefaultSlotSize   = 2048
	MaxSlotSize       = 1 << 16
	// DefaultFirst is the sequence number of a session's first message in
	// MoldUDP64.
	DefaultFirst = 1
)

var (
	// ErrLine means a line index outside [0, Config.Lines).
	ErrLine = errors.New("arb: line out of range")
	// ErrSequence means the Config.Sequence function refused a datagram,
	// or returned the largest uint64, which the arbiter does not accept.
	ErrSequence = errors.New("arb: datagram has no sequence number")
	// ErrOtherSession means a MoldUDP64 packet of a session other than the
	// current one, which has not ended.
	ErrOtherSession = errors.New("arb: moldudp64 packet of another session")
)

// Config configures an Arbiter. The zero value arbitrates two lines of a
// MoldUDP64 feed.
type Config struct {
	// Lines is the number of lines, 1 to MaxLines; 0 means DefaultLines.
	// Lines are numbered from 0.
	Lines int
	// Sequence, when set, gives the sequence number of a datagram: every
	// datagram is one unit, delivered whole. It must not retain p. ok false
	// (and the sequence number math.MaxUint64) counts the datagram as
	// malformed. When Sequence is nil, datagrams are MoldUDP64 packets and
	// every message in them is one unit, numbered by the packet's sequence
	// number plus its index.
	Sequence func(p []byte) (seq uint64, ok bool)
	// GapTimeout is how long a missing sequence number is waited for,
	// from the time its gap was seen, before it is declared lost. Time is
	// whatever the caller passes as now (capture time, wall time). 0 means
	// DefaultGapTimeout; it must not be negative.
	GapTimeout time.Duration
	// Window bounds the arbiter's memory: units are held out of order only
	// within Window sequence numbers of the next one to deliver. A power of
	// two up to MaxWindow; 0 means DefaultWindow. A unit Window or more
	// ahead declares the oldest gaps lost at once (Gap.Reason GapWindow)
	// and is counted in Stats.WindowOverflows.
	Window int
	// SlotSize is the largest unit held out of order, in bytes, up to
	// MaxSlotSize; 0 means DefaultSlotSize. A longer unit that arrives
	// out of order is counted in LineStats.TooLarge and not held (another
	// line's copy may still fill it).
	SlotSize int
	// First is the sequence number of the first unit; 0 means DefaultFirst.
	// Units below it are counted as stale.
	First uint64
}

// Message is one unit delivered in sequence order. Data aliases the
// datagram or the arbiter's buffer: it is valid until the Handler returns.
type Message struct {
	Line int    // the line whose copy arrived first
	Seq  uint64 // sequence number
	Data []byte // the MoldUDP64 message without its length prefix, or the whole datagram
	Time int64  // arrival time of the winning copy, as passed to Datagram
}

// GapReason says why a gap was declared lost.
type GapReason uint8

// Gap reasons.
const (
	GapTimeout GapReason = iota + 1 // waited Config.GapTimeout
	GapWindow                       // a unit arrived Window or more ahead
	GapEnd                          // End was called, or a new session started
)

// String returns the reason's name.
func (r GapReason) String() string {
	switch r {
	case GapTimeout:
		return "timeout"
	case GapWindow:
		return "window"
	case GapEnd:
		return "end"
	}
	return fmt.Sprintf("GapReason(%d)", uint8(r))
}

// Gap is a run of sequence numbers declared lost, From to To inclusive.
type Gap struct {
	From, To uint64
	Reason   GapReason
	Time     int64 // the now of the call that declared it
}

// Handler receives an Arbiter's output. Its methods run on the goroutine
// that called Datagram, Tick or End, and must not call back into the Arbiter.
type Handler interface {
	// Message is called once for every unit, in increasing sequence order.
	// m and m.Data are valid until it returns.
	Message(m *Message)
	// Gap is called for every run of sequence numbers declared lost, in
	// increasing order and interleaved with Message in sequence order.
	Gap(g Gap)
}

// LineStats counts what one line brought.
type LineStats struct {
	Datagrams  uint64 // datagrams passed to Datagram
	Units      uint64 // units (messages or datagrams) in them
	Wins       uint64 // units delivered from this line's copy (it arrived first)
	Duplicates uint64 // units another line's copy had already brought
	Late       uint64 // units that arrived after they were declared lost, not delivered
	Stale      uint64 // units older than Window below the next to deliver: duplicate or late, not told apart
	TooLarge   uint64 // units longer than SlotSize that had to wait and were dropped
	Malformed  uint64 // datagrams refused by Validate or by Config.Sequence
	Sessions   uint64 // MoldUDP64 packets of another, not ended, session (dropped)
	Heartbeats uint64 // MoldUDP64 heartbeats and ends of session
	// Behind sums, over this line's Duplicates, how long after the first
	// copy this line's copy arrived, in the caller's time unit
	// (nanoseconds); BehindMax is the largest such delay.
	BehindSum, BehindMax int64
}

// Stats counts what an Arbiter did.
type Stats struct {
	Delivered       uint64 // units delivered
	Gaps            uint64 // gaps declared lost
	Lost            uint64 // sequence numbers in them
	GapsOpened      uint64 // gaps seen (a unit or heartbeat past a missing number)
	WindowOverflows uint64 // units that arrived Window or more ahead
	Sessions        uint64 // MoldUDP64 sessions followed
	Pending         int    // units held out of order now
	Next            uint64 // the next sequence number to deliver
}

type slot struct {
	seq  uint64
	t    int64
	line int32
	n    int32
	full bool
}

type hist struct {
	seq  uint64 // 0: empty
	t    int64
	line int32
}

type gapRec struct {
	from, to uint64 // [from, to)
	t        int64
}

// Arbiter merges the lines of one feed into one stream in sequence order:
// the first copy of every sequence number is delivered, later copies are
// counted, and missing numbers are declared lost after Config.GapTimeout.
//
// Its memory is fixed at New: Window slots of SlotSize bytes for units held
// out of order (2 MiB with the defaults), and Window entries each of
// delivery history (to tell duplicates from late units) and of open gaps.
// Datagram, Tick and End do not allocate.
//
// An Arbiter is not safe for concurrent use: feed all lines from one
// goroutine, or serialize the calls.
type Arbiter struct {
	h        Handler
	seqf     func([]byte) (uint64, bool)
	timeout  int64
	w, mask  uint64
	slotSize int
	first    uint64

	next, hi uint64 // next to deliver; one past the highest seen
	pending  int
	slots    []slot
	data     []byte
	hist     []hist
	gaps     []gapRec
	gapHead  int
	gapN     int

	session     [MoldSessionLen]byte
	sessionHi   uint64 // session's first 8 bytes, little-endian, for a quick compare
	sessionLo   uint16 // its last 2
	haveSession bool
	ended       bool

	lines []LineStats
	stats Stats
	msg   Message
}

// New returns an Arbiter that calls h. It returns an error for an invalid
// Config.
func New(cfg Config, h Handler) (*Arbiter, error) {
	if h == nil {
		return nil, errors.New("arb: nil Handler")
	}
	if cfg.Lines == 0 {
		cfg.Lines = DefaultLines
	}
	if cfg.Lines < 0 || cfg.Lines > MaxLines {
		return nil, fmt.Errorf("arb: Lines %d out of [1, %d]", cfg.Lines, MaxLines)
	}
	if cfg.GapTimeout < 0 {
		return nil, fmt.Errorf("arb: negative GapTimeout %v", cfg.GapTimeout)
	}
	if cfg.GapTimeout == 0 {
		cfg.GapTimeout = DefaultGapTimeout
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < 1 || cfg.Window > MaxWindow || cfg.Window&(cfg.Window-1) != 0 {
		return nil, fmt.Errorf("arb: Window %d is not a power of two up to %d", cfg.Window, MaxWindow)
	}
	if cfg.SlotSize == 0 {
		cfg.SlotSize = DefaultSlotSize
	}
	if cfg.SlotSize < 1 || cfg.SlotSize > MaxSlotSize {
		return nil, fmt.Errorf("arb: SlotSize %d out of [1, %d]", cfg.SlotSize, MaxSlotSize)
	}
	if cfg.First == 0 {
		cfg.First = DefaultFirst
	}
	if cfg.First == math.MaxUint64 {
		return nil, errors.New("arb: First too large")
	}
	a := &Arbiter{
		h:        h,
		seqf:     cfg.Sequence,
		timeout:  int64(cfg.GapTimeout),
		w:        uint64(cfg.Window),
		mask:     uint64(cfg.Window - 1),
		slotSize: cfg.SlotSize,
		first:    cfg.First,
		next:     cfg.First,
		hi:       cfg.First,
		slots:    make([]slot, cfg.Window),
		data:     make([]byte, cfg.Window*cfg.SlotSize),
		hist:     make([]hist, cfg.Window),
		gaps:     make([]gapRec, cfg.Window),
		lines:    make([]LineStats, cfg.Lines),
	}
	return a, nil
}

// Stats returns the arbiter's counters.
func (a *Arbiter) Stats() Stats {
	s := a.stats
	s.Pending = a.pending
	s.Next = a.next
	return s
}

// LineStats returns the counters of line i (0 <= i < Config.Lines).
func (a *Arbiter) LineStats(i int) LineStats { return a.lines[i] }

// Ended reports whether the MoldUDP64 session has ended and every message
// before its end has been delivered or declared lost: nothing more is to
// come from it.
func (a *Arbiter) Ended() bool { return a.ended && a.pending == 0 && a.next >= a.hi }

// Session returns the MoldUDP64 session followed, and false before the
// first valid packet.
func (a *Arbiter) Session() ([MoldSessionLen]byte, bool) { return a.session, a.haveSession }

// Datagram hands the arbiter one datagram received on line at time now
// (nanoseconds; any clock, as long as every call uses the same one). It first
// declares lost the gaps whose timeout has passed, then delivers what the
// datagram makes deliverable. It does NOT take ownership of p. It returns an
// error, and counts it, for a datagram it cannot use; the arbiter's state is
// unchanged by such a datagram.
func (a *Arbiter) Datagram(line int, p []byte, now int64) error {
	if uint(line) >= uint(len(a.lines)) {
		return ErrLine
	}
	ls := &a.lines[line]
	ls.Datagrams++
	if a.gapN > 0 {
		a.expire(now)
	}
	if a.seqf != nil {
		seq, ok := a.seqf(p)
		if !ok || seq == math.MaxUint64 {
			ls.Malformed++
			return ErrSequence
		}
		ls.Units++
		a.unit(line, seq, p, now)
		return nil
	}
	m := Mold(p)
	if err := m.Validate(); err != nil {
		ls.Malformed++
		return err
	}
	if !a.haveSession {
		a.setSession(m.Session())
		a.haveSession = true
		a.stats.Sessions++
	} else if binary.LittleEndian.Uint64(p) != a.sessionHi || binary.LittleEndian.Uint16(p[8:]) != a.sessionLo {
		if !a.ended {
			ls.Sessions++
			return ErrOtherSession
		}
		a.newSession(m.Session(), now)
	}
	n := int(m.Count())
	if n == 0 || n == MoldEndOfSession {
		ls.Heartbeats++
		if n == MoldEndOfSession {
			a.ended = true
		}
		if s := m.Seq(); s > a.hi {
			a.pushGap(a.hi, s, now)
			a.hi = s
		}
		return nil
	}
	ls.Units += uint64(n)
	seq := m.Seq()
	off := MoldHeaderLen
	for i := 0; i < n; i++ {
		var msg []byte
		msg, off = m.NextMessage(off)
		a.unit(line, seq+uint64(i), msg, now)
	}
	return nil
}

// Tick declares lost the gaps whose timeout has passed at now. Call it when
// no datagram arrives for a while, so that a gap at the end of a burst is
// not held until the next datagram.
func (a *Arbiter) Tick(now int64) {
	if a.gapN > 0 {
		a.expire(now)
	}
}

// End declares every open gap lost (Reason GapEnd) and delivers every unit
// held, as at the end of the input. The arbiter stays usable: later units
// below the next sequence number are counted as late or duplicate.
func (a *Arbiter) End(now int64) {
	a.advanceTo(a.hi, now, GapEnd)
}

// Reset returns the arbiter to its state after New, counters included,
// without declaring anything: units held are dropped. It does not allocate.
func (a *Arbiter) Reset() {
	a.next, a.hi = a.first, a.first
	a.pending, a.gapHead, a.gapN = 0, 0, 0
	clear(a.slots)
	clear(a.hist)
	a.setSession([MoldSessionLen]byte{})
	a.haveSession, a.ended = false, false
	clear(a.lines)
	a.stats = Stats{}
}

func (a *Arbiter) setSession(s [MoldSessionLen]byte) {
	a.session = s
	a.sessionHi = binary.LittleEndian.Uint64(s[:])
	a.sessionLo = binary.LittleEndian.Uint16(s[8:])
}

func (a *Arbiter) newSession(s [MoldSessionLen]byte, now int64) {
	a.End(now)
	a.setSession(s)
	a.ended = false
	a.stats.Sessions++
	a.next, a.hi = a.first, a.first
	clear(a.hist)
}

// unit handles one sequence-numbered unit.
func (a *Arbiter) unit(line int, seq uint64, data []byte, now int64) {
	if seq == a.next {
		a.deliver(line, seq, data, now)
		a.next++
		if a.hi < a.next {
			a.hi = a.next
		}
		if a.pending > 0 {
			a.drain()
		}
		if a.gapN > 0 {
			a.popGaps()
		}
		return
	}
	ls := &a.lines[line]
	if seq < a.next {
		if h := &a.hist[seq&a.mask]; h.seq == seq && seq != 0 {
			a.behind(ls, now-h.t)
		} else if a.next-seq <= a.w && seq >= a.first {
			ls.Late++
		} else {
			ls.Stale++
		}
		return
	}
	if seq-a.next >= a.w {
		a.stats.WindowOverflows++
		a.advanceTo(seq-a.w+1, now, GapWindow)
		if seq == a.next {
			a.unit(line, seq, data, now)
			return
		}
	}
	s := &a.slots[seq&a.mask]
	if s.full {
		a.behind(ls, now-s.t)
		return
	}
	stored := len(data) <= a.slotSize
	if stored {
		i := int(seq&a.mask) * a.slotSize
		copy(a.data[i:], data)
		*s = slot{seq: seq, t: now, line: int32(line), n: int32(len(data)), full: true}
		a.pending++
	} else {
		ls.TooLarge++
	}
	if seq >= a.hi {
		end := seq
		if !stored {
			end = seq + 1
		}
		if end > a.hi {
			a.pushGap(a.hi, end, now)
		}
		a.hi = seq + 1
	}
}

func (a *Arbiter) behind(ls *LineStats, d int64) {
	ls.Duplicates++
	ls.BehindSum += d
	if d > ls.BehindMax {
		ls.BehindMax = d
	}
}

// deliver hands a unit to the Handler and records it in the history.
func (a *Arbiter) deliver(line int, seq uint64, data []byte, t int64) {
	h := &a.hist[seq&a.mask]
	h.seq, h.t, h.line = seq, t, int32(line)
	a.lines[line].Wins++
	a.stats.Delivered++
	m := &a.msg // a field, not a local: a local would escape through h
	m.Line, m.Seq, m.Data, m.Time = line, seq, data, t
	a.h.Message(m)
}

// drain delivers the held units that follow next without a hole.
func (a *Arbiter) drain() {
	for a.pending > 0 {
		s := &a.slots[a.next&a.mask]
		if !s.full || s.seq != a.next {
			return
		}
		s.full = false
		a.pending--
		i := int(a.next&a.mask) * a.slotSize
		a.deliver(int(s.line), a.next, a.data[i:i+int(s.n)], s.t)
		a.next++
	}
	if a.hi < a.next {
		a.hi = a.next
	}
}

// advanceTo declares lost every missing number below target, delivers the
// held units among them in order, and then those that follow without a hole.
func (a *Arbiter) advanceTo(target uint64, now int64, reason GapReason) {
	winEnd := a.next + a.w // every held unit is below it
	if winEnd < a.next {
		winEnd = math.MaxUint64
	}
	for a.next < target {
		if a.pending == 0 || a.next >= winEnd {
			a.lose(a.next, target-1, now, reason)
			a.next = target
			break
		}
		if s := &a.slots[a.next&a.mask]; s.full && s.seq == a.next {
			a.drain()
			continue
		}
		from := a.next
		for a.next < target && a.next < winEnd {
			if s := &a.slots[a.next&a.mask]; s.full && s.seq == a.next {
				break
			}
			a.next++
		}
		a.lose(from, a.next-1, now, reason)
	}
	if a.hi < a.next {
		a.hi = a.next
	}
	if a.pending > 0 {
		a.drain()
	}
	a.popGaps()
}

func (a *Arbiter) lose(from, to uint64, now int64, reason GapReason) {
	a.stats.Gaps++
	a.stats.Lost += to - from + 1
	a.h.Gap(Gap{From: from, To: to, Reason: reason, Time: now})
}

// pushGap records that [from, to) was seen missing at now. When the record
// ring is full the run joins the last record and inherits its older time.
func (a *Arbiter) pushGap(from, to uint64, now int64) {
	a.stats.GapsOpened++
	if a.gapN == len(a.gaps) {
		a.gaps[(a.gapHead+a.gapN-1)%len(a.gaps)].to = to
		return
	}
	a.gaps[(a.gapHead+a.gapN)%len(a.gaps)] = gapRec{from: from, to: to, t: now}
	a.gapN++
}

// popGaps drops the gap records that lie wholly below next.
func (a *Arbiter) popGaps() {
	for a.gapN > 0 && a.gaps[a.gapHead].to <= a.next {
		a.gapHead = (a.gapHead + 1) % len(a.gaps)
		a.gapN--
	}
}

// expire declares lost the gaps seen GapTimeout or longer before now.
func (a *Arbiter) expire(now int64) {
	for a.gapN > 0 {
		g := a.gaps[a.gapHead]
		if now-g.t < a.timeout {
			return
		}
		a.advanceTo(g.to, now, GapTimeout)
	}
}
