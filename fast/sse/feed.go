package sse

import (
	"errors"
	"fmt"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/sse/step"
)

// FeedHandler receives what a FeedDecoder finds in a STEP stream. Records
// passed to OnTrade and OnOrder are valid until the method returns.
type FeedHandler interface {
	Handler
	// OnGap reports a break in the per-category sequence (10072): the
	// message carrying got arrived where expected was due. got > expected
	// means got-expected messages are missing; got < expected is a replay
	// or a restart of the sequence.
	OnGap(category uint32, expected, got uint64)
}

// StepHandler is an optional extension of FeedHandler: a handler that has
// OnStep is told about every verified STEP message before its records are
// decoded (its header, stream offset and raw bytes). m is valid until OnStep
// returns.
type StepHandler interface {
	OnStep(m *step.Message)
}

// ErrorHandler is an optional extension of FeedHandler: a handler that has
// OnError is told about every error Feed meets, in stream order (a
// *step.Error, or a *FeedError, also for a message of an unknown template),
// where Feed itself returns only the first one of its chunk. err is the
// caller's to keep. Errors are rare: each costs an allocation.
type ErrorHandler interface {
	OnError(err error)
}

// FeedConfig bounds a FeedDecoder. The zero value selects the defaults.
type FeedConfig struct {
	// STEP bounds the STEP parser (message size, tracked categories).
	STEP step.Config
	// MaxPMapBytes bounds a FAST presence map; 0 means DefaultMaxPMapBytes.
	MaxPMapBytes int
	// Decoder, when not nil, is the FAST decoder the FeedDecoder decodes
	// payloads with, shared with other FeedDecoders used by the same
	// goroutine. A FeedDecoder keeps no FAST state from one STEP message to
	// the next (the dictionary is reset for each), so the FeedDecoders of
	// many TCP flow directions can share one Decoder: each then costs under
	// 1 KiB instead of 12. The FeedDecoder sets its MaxPMapBytes and resets
	// it before every message. nil: the FeedDecoder makes its own.
	Decoder *Decoder
}

// FeedStats counts what a FeedDecoder has seen.
type FeedStats struct {
	STEP            step.Stats // framing counters, gaps included
	Trades          uint64     // records passed to OnTrade
	Orders          uint64     // records passed to OnOrder
	DecodeErrors    uint64     // STEP messages whose payload failed to decode
	LimitHits       uint64     // of those, failures on a bound (presence map length, fixed string length)
	UnknownTemplate uint64     // STEP messages skipped for a template id the decoder does not know (D9)
}

// FeedError is a FAST decoding error inside the STEP message that starts at
// stream offset Offset. Records of that message before the bad one were
// delivered; the rest of the message is skipped.
type FeedError struct {
	Offset int64  // stream offset of the STEP message
	SeqNum uint64 // its sequence number (34)
	Err    error  // a *fast.DecodeError
}

func (e *FeedError) Error() string {
	return fmt.Sprintf("sse: STEP message %d at stream offset %d: %v", e.SeqNum, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *FeedError) Unwrap() error { return e.Err }

// FeedDecoder decodes an SSE STEP stream into typed records. It is not safe
// for concurrent use; use one per TCP flow direction.
type FeedDecoder struct {
	parser  *step.Parser
	dec     *Decoder
	maxPMap int
	h       FeedHandler
	rh      Handler      // h as a Handler, converted once rather than per message
	sh      StepHandler  // h as a StepHandler, or nil
	eh      ErrorHandler // h as an ErrorHandler, or nil
	stats   FeedStats
}

// NewFeedDecoder returns a decoder calling h. Its STEP buffer is held only
// while an unfinished STEP message is kept from one Feed call to the next
// (see step.Parser; Held tells its size), so a FeedDecoder between messages
// costs its fixed state alone.
func NewFeedDecoder(cfg FeedConfig, h FeedHandler) *FeedDecoder {
	f := &FeedDecoder{parser: step.NewParser(cfg.STEP), dec: cfg.Decoder, maxPMap: cfg.MaxPMapBytes, h: h, rh: h}
	if f.dec == nil {
		f.dec = new(Decoder)
	}
	f.sh, _ = h.(StepHandler)
	f.eh, _ = h.(ErrorHandler)
	return f
}

// Feed decodes every STEP message completed by chunk and keeps the
// unfinished tail for the next call. It does NOT take ownership of chunk. It
// returns the first error met in this chunk (a *step.Error or a *FeedError);
// every error is counted in Stats and decoding goes on past it.
func (f *FeedDecoder) Feed(chunk []byte) error {
	var first error
	f.parser.Feed(chunk)
	for {
		m, err := f.parser.Next()
		if err != nil {
			if f.eh != nil {
				f.eh.OnError(err)
			}
			if first == nil {
				first = err
			}
			continue
		}
		if m == nil {
			return first
		}
		if m.Gap {
			f.h.OnGap(m.Category, m.ExpectedSeq, m.CategorySeq)
		}
		if f.sh != nil {
			f.sh.OnStep(m)
		}
		if err := f.decodePayload(m); err != nil && first == nil {
			first = err
		}
	}
}

// decodePayload decodes the records of one STEP message with a fresh
// dictionary, in one call (the handler is called directly; the decoder
// counts the records).
func (f *FeedDecoder) decodePayload(m *step.Message) error {
	d := f.dec
	d.Reset()
	d.MaxPMapBytes = f.maxPMap
	trades, orders := d.nTrade, d.nOrder
	_, err := d.DecodeRecords(m.Payload, f.rh)
	f.stats.Trades += d.nTrade - trades
	f.stats.Orders += d.nOrder - orders
	if err != nil {
		if errors.Is(err, fast.ErrUnknownTemplate) {
			f.stats.UnknownTemplate++
			if f.eh != nil {
				f.eh.OnError(&FeedError{Offset: m.Offset, SeqNum: m.SeqNum, Err: err})
			}
			return nil
		}
		f.stats.DecodeErrors++
		if errors.Is(err, fast.ErrLimit) {
			f.stats.LimitHits++
		}
		fe := &FeedError{Offset: m.Offset, SeqNum: m.SeqNum, Err: err}
		if f.eh != nil {
			f.eh.OnError(fe)
		}
		return fe
	}
	return nil
}

// Discontinuity tells the decoder that bytes are missing before the next
// chunk (a TCP gap of skipped bytes): the unfinished STEP message is dropped
// and decoding resumes at the next message start. The per-category
// sequence numbers then report the lost messages through OnGap.
func (f *FeedDecoder) Discontinuity(skipped int64) { f.parser.Discontinuity(skipped) }

// Held returns the size in bytes of the STEP buffer the decoder holds for
// an unfinished message: 0 between messages, at most
// FeedConfig.STEP.MaxMessageSize. A caller that keeps many FeedDecoders
// bounds their memory by calling Discontinuity on some when the sum grows
// too large: the unfinished messages are dropped (counted in
// FeedStats.STEP.SkippedBytes) and reported through OnGap when the next
// message of their category arrives.
func (f *FeedDecoder) Held() int { return f.parser.Held() }

// Stats returns the counters.
func (f *FeedDecoder) Stats() FeedStats {
	s := f.stats
	s.STEP = f.parser.Stats()
	return s
}

// FeedEncoder turns records into STEP messages as SSE sends them: one STEP
// message per batch of records of one template, the FAST dictionary reset
// for each message, sequence numbers (34 and the per-category 10072)
// counted up. The zero value is not ready: use NewFeedEncoder. It allocates
// nothing in steady state.
type FeedEncoder struct {
	// Header supplies SenderCompID, TargetCompID and SendingTime (set
	// SendingTime before each message if it matters); MsgType, SeqNum and
	// the category fields are filled in by the encoder.
	Header step.Header
	// SeqNum is the next STEP sequence number (34).
	SeqNum uint64
	// TradeSeq and OrderSeq are the next per-category sequence numbers
	// (10072) of categories 7 and 58.
	TradeSeq, OrderSeq uint64
	// ExplicitTemplateID sends the template id in every record (see
	// Encoder.ExplicitTemplateID); by default only the first record of a
	// STEP message carries it.
	ExplicitTemplateID bool

	enc     Encoder
	payload []byte
}

// NewFeedEncoder returns an encoder whose sequence numbers start at 1 and
// whose header names sender VDE and target VSS.
func NewFeedEncoder() *FeedEncoder {
	return &FeedEncoder{
		Header:   step.Header{SenderCompID: []byte("VDE"), TargetCompID: []byte("VSS")},
		SeqNum:   1,
		TradeSeq: 1,
		OrderSeq: 1,
	}
}

var (
	msgTypeTrade = []byte(TradeMessageType)
	msgTypeOrder = []byte(OrderMessageType)
)

// AppendTrades appends one STEP message (category 7) carrying trades to dst.
// On error dst is returned unchanged and no sequence number is used.
func (f *FeedEncoder) AppendTrades(dst []byte, trades []Trade) ([]byte, error) {
	f.enc.Reset()
	f.enc.ExplicitTemplateID = f.ExplicitTemplateID
	f.payload = f.payload[:0]
	var err error
	for i := range trades {
		if f.payload, err = f.enc.AppendTrade(f.payload, &trades[i]); err != nil {
			return dst, err
		}
	}
	dst = f.appendMessage(dst, msgTypeTrade, CategoryTrade, f.TradeSeq)
	f.TradeSeq++
	return dst, nil
}

// AppendOrders appends one STEP message (category 58) carrying orders to dst.
// On error dst is returned unchanged and no sequence number is used.
func (f *FeedEncoder) AppendOrders(dst []byte, orders []Order) ([]byte, error) {
	f.enc.Reset()
	f.enc.ExplicitTemplateID = f.ExplicitTemplateID
	f.payload = f.payload[:0]
	var err error
	for i := range orders {
		if f.payload, err = f.enc.AppendOrder(f.payload, &orders[i]); err != nil {
			return dst, err
		}
	}
	dst = f.appendMessage(dst, msgTypeOrder, CategoryOrder, f.OrderSeq)
	f.OrderSeq++
	return dst, nil
}

func (f *FeedEncoder) appendMessage(dst, msgType []byte, category uint32, catSeq uint64) []byte {
	h := &f.Header
	h.MsgType, h.SeqNum = msgType, f.SeqNum
	h.HasCategory, h.Category, h.CategorySeq = true, category, catSeq
	f.SeqNum++
	return step.AppendMessage(dst, h, f.payload)
}
