package feed

import (
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/mirror"
)

// Meta says where a record or sequence gap came from.
type Meta struct {
	// Flow is the TCP flow direction that carried the STEP message.
	Flow mirror.FlowKey
	// Time is the capture time, in nanoseconds since the Unix epoch, of
	// the frame whose bytes completed the STEP message.
	Time int64
}

// Handler receives what a Decoder finds. Timestamps are capture times in
// nanoseconds since the Unix epoch. A Handler must not call back into the
// Decoder.
//
// For every flow direction the calls come in the order FlowStart, then
// Trade, Order, SequenceGap and TCPGap calls in stream order, then FlowEnd.
// A direction may start again after it ended (a new SYN).
type Handler interface {
	// FlowStart reports that the direction's stream offset 0 is known.
	FlowStart(k mirror.FlowKey, ts int64)
	// Trade hands over one UA3201 record. t is reused after the call
	// returns: copy what you keep.
	Trade(t *sse.Trade, m Meta)
	// Order hands over one UA5801 record. o is reused after the call
	// returns: copy what you keep.
	Order(o *sse.Order, m Meta)
	// TCPGap reports that the length bytes at stream offset offset of
	// direction k were never captured and will never be delivered.
	TCPGap(k mirror.FlowKey, offset, length uint64, ts int64)
	// SequenceGap reports a break in STEP category's sequence numbers
	// (10072): the message numbered got arrived where expected was due.
	// got > expected means got-expected messages are missing; got <
	// expected is a replay or a restart of the sequence.
	SequenceGap(category uint32, expected, got uint64, m Meta)
	// FlowEnd reports that the direction ended; no call for k follows
	// unless a new FlowStart.
	FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64)
}

// StreamHandler is a Handler that also receives every flow direction's
// in-order bytes, before they are decoded (to record them, or to decode
// another protocol with Config.ReassembleOnly). The Decoder checks for it
// once, in New.
type StreamHandler interface {
	Handler
	// Data hands over in-order bytes; offset is the stream offset of
	// data[0]. data is reused after the call returns: copy what you keep.
	Data(k mirror.FlowKey, offset uint64, data []byte, ts int64)
}

// ErrorHandler is a Handler that is also told about every STEP framing or
// FAST decoding error, the errors Stats.DecodeErrors counts (a resynchronising
// run of garbage once, however long): offset is the stream offset of the
// STEP message or garbage run in the flow direction m.Flow, err a
// *step.Error or an *sse.FeedError (whose cause fast.Code names). The
// Decoder checks for it once, in New. Errors are rare; each costs an
// allocation.
type ErrorHandler interface {
	Handler
	DecodeError(offset uint64, err error, m Meta)
}

// HandlerFuncs is a Handler made of functions; a nil field ignores its
// events.
type HandlerFuncs struct {
	OnFlowStart   func(k mirror.FlowKey, ts int64)
	OnTrade       func(t *sse.Trade, m Meta)
	OnOrder       func(o *sse.Order, m Meta)
	OnTCPGap      func(k mirror.FlowKey, offset, length uint64, ts int64)
	OnSequenceGap func(category uint32, expected, got uint64, m Meta)
	OnFlowEnd     func(k mirror.FlowKey, reason mirror.EndReason, ts int64)
}

var _ Handler = HandlerFuncs{}

// FlowStart implements Handler.FlowStart.
func (h HandlerFuncs) FlowStart(k mirror.FlowKey, ts int64) {
	if h.OnFlowStart != nil {
		h.OnFlowStart(k, ts)
	}
}

// Trade implements Handler.Trade.
func (h HandlerFuncs) Trade(t *sse.Trade, m Meta) {
	if h.OnTrade != nil {
		h.OnTrade(t, m)
	}
}

// Order implements Handler.Order.
func (h HandlerFuncs) Order(o *sse.Order, m Meta) {
	if h.OnOrder != nil {
		h.OnOrder(o, m)
	}
}

// TCPGap implements Handler.TCPGap.
func (h HandlerFuncs) TCPGap(k mirror.FlowKey, offset, length uint64, ts int64) {
	if h.OnTCPGap != nil {
		h.OnTCPGap(k, offset, length, ts)
	}
}

// SequenceGap implements Handler.SequenceGap.
func (h HandlerFuncs) SequenceGap(category uint32, expected, got uint64, m Meta) {
	if h.OnSequenceGap != nil {
		h.OnSequenceGap(category, expected, got, m)
	}
}

// FlowEnd implements Handler.FlowEnd.
func (h HandlerFuncs) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	if h.OnFlowEnd != nil {
		h.OnFlowEnd(k, reason, ts)
	}
}
