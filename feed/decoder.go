package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// DefaultBufferTotal is Config.BufferTotal's default: 48 MiB of reassembly
// buffers and 16 MiB for the decoders' unfinished STEP messages.
const DefaultBufferTotal = 64 << 20

// ErrConfig is wrapped by the error New returns for an invalid Config.
var ErrConfig = errors.New("feed: invalid config")

// Config configures a Decoder. The zero value is the default configuration.
type Config struct {
	// BufferPerFlow is the number of bytes held out of order per flow
	// direction (mirror.Config.BufferPerFlow). 0 means
	// mirror.DefaultBufferPerFlow (32 KiB); at most mirror.MaxBufferPerFlow.
	BufferPerFlow int
	// MaxFlows is the number of flow directions tracked at once
	// (mirror.Config.MaxFlows); each costs about 200 bytes, and one that
	// carries data under 1 KiB more for its decoder while it lives. 0 means
	// mirror.DefaultMaxFlows (1024); at most mirror.MaxMaxFlows.
	MaxFlows int
	// BufferTotal bounds the stream bytes held in memory across all flow
	// directions: three quarters (BufferTotal - BufferTotal/4) for the
	// reassembly buffers (mirror.Config.MaxBufferTotal), one quarter for the
	// decoders' unfinished STEP messages. 0 means DefaultBufferTotal (64 MiB),
	// raised to 4/3 of BufferPerFlow when that is larger. Otherwise the
	// reassembly share must be from BufferPerFlow to mirror.MaxMaxBufferTotal
	// and the STEP share at least STEP.MaxMessageSize (64 KiB by default), so
	// at least 256 KiB.
	BufferTotal int64
	// Budget, when not nil, is shared by the Decoders of the receive
	// queues of one source (mirror.Config.Budget): their flow directions
	// and reassembly buffers count against it together. Each Decoder's
	// reassembly buffers are then bounded by the Budget's MaxBufferTotal
	// alone, and BufferTotal sets only its own STEP share (a quarter of
	// it, at least STEP.MaxMessageSize); MaxFlows still sizes its table:
	// give it the Budget's MaxFlows to let any one queue use them all.
	Budget *mirror.Budget
	// HoleTimeout is the capture time a hole is waited for
	// (mirror.Config.HoleTimeout). 0 means mirror.DefaultHoleTimeout
	// (100ms); a negative value disables the timeout.
	HoleTimeout time.Duration
	// Checksum is the checksum policy (mirror.Config.Checksum); the zero
	// value is mirror.ChecksumAuto.
	Checksum mirror.ChecksumMode
	// History keeps the last BufferPerFlow delivered bytes of every
	// direction, so that retransmissions of them are compared
	// (mirror.Config.History). Off by default.
	History bool
	// STEP bounds each direction's STEP parser (sse.FeedConfig.STEP); zero
	// fields take step's defaults.
	STEP step.Config
	// MaxPMapBytes bounds a FAST presence map; 0 means
	// sse.DefaultMaxPMapBytes.
	MaxPMapBytes int
	// ReassembleOnly switches decoding off: no decoder is made, and the
	// in-order bytes go only to the Handler's Data method when it is a
	// StreamHandler (TCPGap, FlowStart and FlowEnd are still called).
	ReassembleOnly bool
}

// budgets returns the reassembly and STEP shares of BufferTotal.
func (c Config) budgets() (reassembly int64, stepBudget int, err error) {
	perFlow := c.BufferPerFlow
	if perFlow == 0 {
		perFlow = mirror.DefaultBufferPerFlow
	}
	total := c.BufferTotal
	if total == 0 {
		total = max(DefaultBufferTotal, (int64(perFlow)*4+2)/3)
	}
	maxMsg := c.STEP.MaxMessageSize
	if maxMsg == 0 {
		maxMsg = step.DefaultMaxMessageSize
	}
	s := total / 4
	reassembly = total - s
	if c.Budget != nil {
		reassembly = c.Budget.MaxBufferTotal() // mirror.New checks it against perFlow
		if total < 0 || s < int64(maxMsg) {
			return 0, 0, fmt.Errorf("%w: BufferTotal %d: want 1/4 of it %d (STEP.MaxMessageSize) at least", ErrConfig, total, maxMsg)
		}
		return reassembly, int(s), nil
	}
	if total < 0 || reassembly < int64(perFlow) || s < int64(maxMsg) || reassembly > mirror.MaxMaxBufferTotal {
		return 0, 0, fmt.Errorf("%w: BufferTotal %d: want 3/4 of it %d (BufferPerFlow) to %d, 1/4 of it %d (STEP.MaxMessageSize) at least",
			ErrConfig, total, perFlow, int64(mirror.MaxMaxBufferTotal), maxMsg)
	}
	return reassembly, int(s), nil
}

// Stats counts what a Decoder has seen. The record, message and error
// counts include the flow directions still open.
type Stats struct {
	// Mirror holds the reassembler's counters: frames, flow directions,
	// delivered bytes, TCP gaps (Gaps, GapBytes: bytes never captured),
	// duplicates, anomalies, and frames dropped by reason (Malformed,
	// Truncated, Fragments, checksums, UnsupportedLink, ...).
	Mirror mirror.Stats
	// FrameBytes is the sum of the lengths of the frames handed in.
	FrameBytes uint64
	// Messages counts the STEP messages framed and verified.
	Messages uint64
	// Trades and Orders count the records passed to the Handler.
	Trades, Orders uint64
	// SequenceGaps counts STEP messages whose category sequence number
	// was not the one due (Handler.SequenceGap calls).
	SequenceGaps uint64
	// DecodeErrors counts STEP framing errors (resynchronisations,
	// oversized messages, checksum and field errors), FAST decoding errors
	// and messages of unknown templates.
	DecodeErrors uint64
	// UnfinishedDropped counts the unfinished STEP messages dropped to
	// stay within the STEP share of Config.BufferTotal, and
	// UnfinishedDroppedBytes their bytes held then.
	UnfinishedDropped, UnfinishedDroppedBytes uint64
}

// add adds the counters of one direction's decoder to st.
func (st *Stats) add(fs sse.FeedStats) {
	st.Messages += fs.STEP.Messages
	st.Trades += fs.Trades
	st.Orders += fs.Orders
	st.SequenceGaps += fs.STEP.Gaps
	st.DecodeErrors += fs.STEP.Resyncs + fs.STEP.TooLarge + fs.STEP.ChecksumErrors + fs.STEP.FieldErrors +
		fs.DecodeErrors + fs.UnknownTemplate
}

// Decoder turns captured frames into SSE records: a mirror.Assembler
// reassembles the TCP flow directions and an sse.FeedDecoder per direction
// decodes their STEP messages. It is not safe for concurrent use.
type Decoder struct {
	asm     *mirror.Assembler
	h       Handler
	stream  StreamHandler // h when it is one, else nil
	errs    ErrorHandler  // h when it is one, else nil
	feedCfg sse.FeedConfig
	dec     sse.Decoder // shared by the directions' FeedDecoders
	decode  bool

	flows map[mirror.FlowKey]*flowState
	// last is the flow of the previous Data call, tried before the map.
	last *flowState

	stepBudget int // bound on the STEP buffers held in all
	stepHeld   int // their sum
	// holdersHead..holdersTail lists the flows whose decoder holds a STEP
	// buffer, the one that has held it longest first.
	holdersHead, holdersTail *flowState

	retired Stats         // decoder counters of ended directions, drops, frame bytes
	batch   []frame.Frame // Run's, made on its first call
}

// Batch geometry of Run: slots hold a 64 KiB IP packet behind the longest
// link header mirror decodes (LINUX_SLL2, 20 bytes), so tcpdump's former
// default snap length is read whole in every link type.
const (
	runBatchFrames = 64
	runSlotSize    = 65536 + 20
)

// New returns a Decoder that reports to h. Zero fields of cfg take their
// defaults; out-of-range values are an error wrapping ErrConfig (or, for
// the reassembler's fields, mirror.ErrConfig). New allocates the flow table
// (about 200 bytes per MaxFlows); reassembly buffers, decoders and Run's
// frame batch are allocated when first needed and reused.
func New(cfg Config, h Handler) (*Decoder, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrConfig)
	}
	reassembly, stepBudget, err := cfg.budgets()
	if err != nil {
		return nil, err
	}
	d := &Decoder{
		h:          h,
		decode:     !cfg.ReassembleOnly,
		flows:      map[mirror.FlowKey]*flowState{},
		stepBudget: stepBudget,
	}
	d.stream, _ = h.(StreamHandler)
	d.errs, _ = h.(ErrorHandler)
	d.feedCfg = sse.FeedConfig{STEP: cfg.STEP, MaxPMapBytes: cfg.MaxPMapBytes, Decoder: &d.dec}
	d.asm, err = mirror.New(mirror.Config{
		BufferPerFlow: cfg.BufferPerFlow, MaxFlows: cfg.MaxFlows, MaxBufferTotal: reassembly,
		HoleTimeout: cfg.HoleTimeout, Checksum: cfg.Checksum, History: cfg.History, Budget: cfg.Budget,
	}, (*mirrorHandler)(d))
	if err != nil {
		return nil, err
	}
	return d, nil
}

// HandleFrame handles one frame whose link-layer header is of pcap link
// type linkType (frame.Frame.LinkType; see mirror.Assembler.HandleLinkFrame
// for those decoded), captured at ts (nanoseconds since the Unix epoch).
// The Handler is called for what the frame completes before HandleFrame
// returns. A dropped frame returns one of mirror's Err values; such errors
// are per-frame, never fatal, and counted in Stats.Mirror. HandleFrame does
// NOT take ownership of data.
func (d *Decoder) HandleFrame(linkType uint16, data []byte, ts int64) error {
	d.retired.FrameBytes += uint64(len(data))
	return d.asm.HandleLinkFrame(linkType, data, ts)
}

// HandleSourceFrame is HandleFrame for a frame as a frame.Source returned
// it: its link type, bytes and time, and, when the source verified its
// checksums (Frame.ChecksumVerified), without checking them again
// (mirror.Assembler.HandleVerifiedLinkFrame). Run uses it.
func (d *Decoder) HandleSourceFrame(f *frame.Frame) error {
	data := f.Data()
	d.retired.FrameBytes += uint64(len(data))
	if f.ChecksumVerified {
		return d.asm.HandleVerifiedLinkFrame(f.LinkType, data, f.Time)
	}
	return d.asm.HandleLinkFrame(f.LinkType, data, f.Time)
}

// Run reads frames from src and handles them until src returns io.EOF
// (Run then returns nil), another error (returned as it is), or ctx is
// done (Run returns ctx.Err()). ctx is checked between batches: a Source
// blocked in ReadFrames is not woken by it, so close a live source when
// ctx is done (context.AfterFunc). An error with a Timeout method that
// reports true (a live source's read timeout) is not an end: Run advances
// capture time to the wall clock (Flush), so holes time out on a quiet
// link, and reads on. Run does not close src and does not end the flows:
// call Close at the end of the input.
func (d *Decoder) Run(ctx context.Context, src frame.Source) error {
	if d.batch == nil {
		d.batch = frame.NewBatch(runBatchFrames, runSlotSize)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := src.ReadFrames(d.batch)
		for i := range d.batch[:n] {
			f := &d.batch[i]
			d.HandleSourceFrame(f) // per-frame errors are counted in Stats
		}
		var te interface{ Timeout() bool }
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &te) && te.Timeout():
			d.Flush(time.Now().UnixNano())
		default:
			return err
		}
	}
}

// Flush advances capture time to ts without a frame: holes older than
// Config.HoleTimeout are skipped and reported, and FINs waiting that long
// end their flows.
func (d *Decoder) Flush(ts int64) { d.asm.Flush(ts) }

// Close ends the input: every remaining hole is skipped and reported, the
// held data delivered and decoded, and every flow ends. The Decoder is
// then empty and may be reused; its Stats are kept.
func (d *Decoder) Close() {
	d.asm.Close()
	for k, fs := range d.flows {
		d.retire(fs)
		delete(d.flows, k)
	}
	d.last = nil
}

// Stats returns the counters.
func (d *Decoder) Stats() Stats {
	st := d.retired
	st.Mirror = d.asm.Stats()
	for _, fs := range d.flows {
		st.add(fs.dec.Stats())
	}
	return st
}

// OffloadedFlows returns the flow directions treated as checksum-offloaded
// (mirror.Assembler.OffloadedFlows). The slice is a copy.
func (d *Decoder) OffloadedFlows() []mirror.FlowKey { return d.asm.OffloadedFlows() }
