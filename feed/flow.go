package feed

import (
	"errors"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/mirror"
)

// flowState is one flow direction's decoding state. It is the direction's
// sse.FeedHandler, so records reach the Handler with their flow.
type flowState struct {
	d    *Decoder
	meta Meta // the direction, and the capture time of the chunk being decoded
	dec  *sse.FeedDecoder
	// base is the stream offset of the first byte fed to dec: the STEP
	// parser counts its offsets from there.
	base uint64
	// held is dec.Held() as last accounted in Decoder.stepHeld; prev and
	// next link the flow in the Decoder's holders while held > 0.
	held       int
	prev, next *flowState
}

// OnTrade implements sse.Handler.OnTrade.
func (fs *flowState) OnTrade(t *sse.Trade) { fs.d.h.Trade(t, fs.meta) }

// OnOrder implements sse.Handler.OnOrder.
func (fs *flowState) OnOrder(o *sse.Order) { fs.d.h.Order(o, fs.meta) }

// OnGap implements sse.FeedHandler.OnGap.
func (fs *flowState) OnGap(category uint32, expected, got uint64) {
	fs.d.h.SequenceGap(category, expected, got, fs.meta)
}

// OnError implements sse.ErrorHandler.OnError: the error goes to the
// Handler when it is an ErrorHandler, with its stream offset.
func (fs *flowState) OnError(err error) {
	if fs.d.errs == nil {
		return
	}
	var off int64
	var se *step.Error
	var fe *sse.FeedError
	switch {
	case errors.As(err, &fe):
		off = fe.Offset
	case errors.As(err, &se):
		off = se.Offset
	}
	fs.d.errs.DecodeError(fs.base+uint64(off), err, fs.meta)
}

// mirrorHandler is the Decoder seen as the mirror.Handler, so that the
// Decoder's own method set stays the public API.
type mirrorHandler Decoder

var _ mirror.Handler = (*mirrorHandler)(nil)

// FlowStart implements mirror.Handler.FlowStart.
func (m *mirrorHandler) FlowStart(k mirror.FlowKey, ts int64) { m.h.FlowStart(k, ts) }

// Data implements mirror.Handler.Data.
func (m *mirrorHandler) Data(k mirror.FlowKey, offset uint64, data []byte, ts int64) {
	d := (*Decoder)(m)
	if d.stream != nil {
		d.stream.Data(k, offset, data, ts)
	}
	if !d.decode {
		return
	}
	fs := d.lookup(k)
	if fs == nil {
		fs = d.flow(k)
		fs.base = offset
	}
	fs.meta.Time = ts
	// Errors are counted in the decoder's Stats and decoding goes on past
	// them.
	fs.dec.Feed(data) //nolint:errcheck
	d.account(fs)
}

// Gap implements mirror.Handler.Gap.
func (m *mirrorHandler) Gap(k mirror.FlowKey, offset, length uint64, ts int64) {
	d := (*Decoder)(m)
	if fs := d.lookup(k); fs != nil {
		fs.dec.Discontinuity(int64(length))
		d.account(fs)
	}
	d.h.TCPGap(k, offset, length, ts)
}

// FlowEnd implements mirror.Handler.FlowEnd.
func (m *mirrorHandler) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	d := (*Decoder)(m)
	if fs := d.lookup(k); fs != nil {
		d.retire(fs)
		delete(d.flows, k)
		if d.last == fs {
			d.last = nil
		}
	}
	d.h.FlowEnd(k, reason, ts)
}

// lookup returns k's decoding state, nil when it has none.
func (d *Decoder) lookup(k mirror.FlowKey) *flowState {
	if d.last != nil && d.last.meta.Flow == k {
		return d.last
	}
	fs := d.flows[k]
	if fs != nil {
		d.last = fs
	}
	return fs
}

// flow returns k's decoding state, creating it on the direction's first
// bytes (so directions that carry no data cost no decoder).
func (d *Decoder) flow(k mirror.FlowKey) *flowState {
	if fs := d.lookup(k); fs != nil {
		return fs
	}
	fs := &flowState{d: d, meta: Meta{Flow: k}}
	fs.dec = sse.NewFeedDecoder(d.feedCfg, fs)
	d.flows[k] = fs
	d.last = fs
	return fs
}

// account brings stepHeld and the holders up to date with what fs's decoder
// holds now, then drops the unfinished messages of the other holders, those
// that have held theirs longest first, until stepHeld is within stepBudget
// again.
func (d *Decoder) account(fs *flowState) {
	h := fs.dec.Held()
	d.stepHeld += h - fs.held
	if fs.held > 0 && (h == 0 || fs != d.holdersTail) {
		d.unlinkHolder(fs)
	}
	if h > 0 && fs != d.holdersTail {
		fs.prev = d.holdersTail
		if d.holdersTail != nil {
			d.holdersTail.next = fs
		} else {
			d.holdersHead = fs
		}
		d.holdersTail = fs
	}
	fs.held = h
	for d.stepHeld > d.stepBudget && d.holdersHead != nil && d.holdersHead != fs {
		v := d.holdersHead
		skipped := v.dec.Stats().STEP.SkippedBytes
		v.dec.Discontinuity(0)
		d.retired.UnfinishedDropped++
		d.retired.UnfinishedDroppedBytes += v.dec.Stats().STEP.SkippedBytes - skipped
		d.stepHeld -= v.held
		v.held = 0
		d.unlinkHolder(v)
	}
}

func (d *Decoder) unlinkHolder(fs *flowState) {
	if fs.prev != nil {
		fs.prev.next = fs.next
	} else {
		d.holdersHead = fs.next
	}
	if fs.next != nil {
		fs.next.prev = fs.prev
	} else {
		d.holdersTail = fs.prev
	}
	fs.prev, fs.next = nil, nil
}

// retire adds an ended direction's decoder counters to the totals and
// releases its share of the STEP budget.
func (d *Decoder) retire(fs *flowState) {
	if fs.held > 0 {
		d.stepHeld -= fs.held
		fs.held = 0
		d.unlinkHolder(fs)
	}
	d.retired.add(fs.dec.Stats())
}
