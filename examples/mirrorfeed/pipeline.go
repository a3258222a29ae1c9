package main

import (
	"bufio"
	"fmt"
	"strconv"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/mirror"
)

// pipeline is the mirror.Handler: it hands each flow direction's in-order
// bytes to that direction's SSE feed decoder and to the -raw writer, and
// prints what the decoders find.
//
// The decoders share one FAST decoder, so a direction costs under 1 KiB
// plus the STEP buffer its decoder holds for an unfinished message. Those
// buffers are bounded together by stepBudget: past it, the decoders that
// have held theirs longest drop their unfinished messages (stepDrops),
// which show up as STEP sequence gaps when their next messages arrive.
type pipeline struct {
	opt   options
	out   *bufio.Writer
	line  []byte // reused output line
	flows map[mirror.FlowKey]*flowState
	dec   sse.Decoder // shared by the flows' FeedDecoders
	raw   *rawWriter

	stepBudget int // bound on the STEP buffers held in all
	stepHeld   int // their sum
	// holders lists the flows whose decoder holds a STEP buffer, the one
	// that has held it longest first.
	holdersHead, holdersTail *flowState
	stepDrops, stepDropBytes uint64 // unfinished messages dropped for stepBudget
	// rawErr is the first -raw write error; writing stops there.
	rawErr error

	trades, orders uint64
	seqGaps        uint64 // STEP per-category sequence breaks, of ended flows
	decodeErrors   uint64 // STEP framing, checksum and FAST errors, of ended flows
}

// flowState is one flow direction's decoding state. It is the direction's
// sse.FeedHandler, so records arrive with their flow.
type flowState struct {
	p       *pipeline
	key     mirror.FlowKey
	keyText []byte // key.String(), formatted once
	dec     *sse.FeedDecoder
	ts      int64 // capture time of the chunk being decoded
	// held is dec.Held() as last accounted in pipeline.stepHeld; prev and
	// next link the flow in the pipeline's holders while held > 0.
	held       int
	prev, next *flowState
}

func newPipeline(o options, out *bufio.Writer) *pipeline {
	p := &pipeline{opt: o, out: out, flows: map[mirror.FlowKey]*flowState{}, stepBudget: o.stepBudget}
	if o.rawDir != "" {
		p.raw = newRawWriter(o.rawDir)
	}
	return p
}

// FlowStart implements mirror.Handler.FlowStart.
func (p *pipeline) FlowStart(k mirror.FlowKey, ts int64) {
	if p.raw != nil {
		p.raw.start(k)
	}
}

// Data implements mirror.Handler.Data.
func (p *pipeline) Data(k mirror.FlowKey, offset uint64, data []byte, ts int64) {
	if p.raw != nil && p.rawErr == nil {
		p.rawErr = p.raw.data(k, data)
	}
	if p.opt.decode == "none" {
		return
	}
	fs := p.flow(k)
	fs.ts = ts
	// Errors are counted in the decoder's Stats (the summary reports them)
	// and decoding goes on past them.
	fs.dec.Feed(data) //nolint:errcheck
	p.account(fs)
}

// account brings stepHeld and the holders up to date with what fs's decoder
// holds now, then drops unfinished messages of the other holders, those
// that have held theirs longest first, until stepHeld is within
// stepBudget again.
func (p *pipeline) account(fs *flowState) {
	h := fs.dec.Held()
	p.stepHeld += h - fs.held
	if fs.held > 0 && (h == 0 || fs != p.holdersTail) {
		p.unlinkHolder(fs)
	}
	if h > 0 && fs != p.holdersTail {
		fs.prev = p.holdersTail
		if p.holdersTail != nil {
			p.holdersTail.next = fs
		} else {
			p.holdersHead = fs
		}
		p.holdersTail = fs
	}
	fs.held = h
	for p.stepHeld > p.stepBudget && p.holdersHead != nil && p.holdersHead != fs {
		v := p.holdersHead
		skipped := v.dec.Stats().STEP.SkippedBytes
		v.dec.Discontinuity(0)
		p.stepDrops++
		p.stepDropBytes += v.dec.Stats().STEP.SkippedBytes - skipped
		p.stepHeld -= v.held
		v.held = 0
		p.unlinkHolder(v)
	}
}

func (p *pipeline) unlinkHolder(fs *flowState) {
	if fs.prev != nil {
		fs.prev.next = fs.next
	} else {
		p.holdersHead = fs.next
	}
	if fs.next != nil {
		fs.next.prev = fs.prev
	} else {
		p.holdersTail = fs.prev
	}
	fs.prev, fs.next = nil, nil
}

// Gap implements mirror.Handler.Gap.
func (p *pipeline) Gap(k mirror.FlowKey, offset, length uint64, ts int64) {
	if p.raw != nil {
		p.raw.gap(k, offset, length)
	}
	if fs, ok := p.flows[k]; ok {
		fs.dec.Discontinuity(int64(length))
		p.account(fs)
	}
	if p.opt.quiet {
		return
	}
	switch p.opt.format {
	case "text":
		p.line = append(p.line[:0], "gap "...)
		p.line = append(p.line, k.String()...)
		p.line = append(p.line, " offset="...)
		p.line = strconv.AppendUint(p.line, offset, 10)
		p.line = append(p.line, " length="...)
		p.line = strconv.AppendUint(p.line, length, 10)
		p.line = append(p.line, '\n')
	case "json":
		p.line = append(p.line[:0], `{"type":"gap","flow":"`...)
		p.line = append(p.line, k.String()...)
		p.line = append(p.line, `","ts":`...)
		p.line = strconv.AppendInt(p.line, ts, 10)
		p.line = append(p.line, `,"offset":`...)
		p.line = strconv.AppendUint(p.line, offset, 10)
		p.line = append(p.line, `,"length":`...)
		p.line = strconv.AppendUint(p.line, length, 10)
		p.line = append(p.line, "}\n"...)
	default:
		return
	}
	p.out.Write(p.line)
}

// FlowEnd implements mirror.Handler.FlowEnd.
func (p *pipeline) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	if p.raw != nil {
		if err := p.raw.end(k); err != nil && p.rawErr == nil {
			p.rawErr = err
		}
	}
	if fs, ok := p.flows[k]; ok {
		p.retire(fs)
		delete(p.flows, k)
	}
}

// flow returns k's decoding state, creating it on the direction's first
// bytes (so directions that carry no data cost no decoder buffer).
func (p *pipeline) flow(k mirror.FlowKey) *flowState {
	if fs, ok := p.flows[k]; ok {
		return fs
	}
	fs := &flowState{p: p, key: k, keyText: []byte(k.String())}
	fs.dec = sse.NewFeedDecoder(sse.FeedConfig{Decoder: &p.dec}, fs)
	p.flows[k] = fs
	return fs
}

// retire adds an ended flow's decoder counters to the totals.
func (p *pipeline) retire(fs *flowState) {
	if fs.held > 0 {
		p.stepHeld -= fs.held
		fs.held = 0
		p.unlinkHolder(fs)
	}
	st := fs.dec.Stats()
	p.seqGaps += st.STEP.Gaps
	p.decodeErrors += st.STEP.Resyncs + st.STEP.TooLarge + st.STEP.ChecksumErrors + st.STEP.FieldErrors + st.DecodeErrors + st.UnknownTemplate
}

// finish retires the flows still open (none after mirror's Close) and ends
// the -raw output.
func (p *pipeline) finish() {
	for k, fs := range p.flows {
		p.retire(fs)
		delete(p.flows, k)
	}
	if p.raw != nil {
		if err := p.raw.close(); err != nil && p.rawErr == nil {
			p.rawErr = err
		}
	}
}

// OnTrade implements sse.Handler.OnTrade.
func (fs *flowState) OnTrade(t *sse.Trade) {
	p := fs.p
	p.trades++
	if p.opt.quiet {
		return
	}
	switch p.opt.format {
	case "text":
		p.line = append(p.line[:0], fs.keyText...)
		p.line = append(p.line, ' ')
		p.line = t.AppendText(p.line)
		p.line = append(p.line, '\n')
	case "json":
		p.line = appendTradeJSON(p.line[:0], fs.keyText, fs.ts, t)
	case "csv":
		p.line = appendTradeCSV(p.line[:0], fs.keyText, fs.ts, t)
	}
	p.out.Write(p.line)
}

// OnOrder implements sse.Handler.OnOrder.
func (fs *flowState) OnOrder(o *sse.Order) {
	p := fs.p
	p.orders++
	if p.opt.quiet {
		return
	}
	switch p.opt.format {
	case "text":
		p.line = append(p.line[:0], fs.keyText...)
		p.line = append(p.line, ' ')
		p.line = o.AppendText(p.line)
		p.line = append(p.line, '\n')
	case "json":
		p.line = appendOrderJSON(p.line[:0], fs.keyText, fs.ts, o)
	case "csv":
		p.line = appendOrderCSV(p.line[:0], fs.keyText, fs.ts, o)
	}
	p.out.Write(p.line)
}

// OnGap implements sse.FeedHandler.OnGap: a STEP sequence break, counted
// by the decoder and reported in text output.
func (fs *flowState) OnGap(category uint32, expected, got uint64) {
	p := fs.p
	if p.opt.quiet || p.opt.format != "text" {
		return
	}
	p.line = append(p.line[:0], fs.keyText...)
	p.line = append(p.line, " step-sequence-gap category="...)
	p.line = strconv.AppendUint(p.line, uint64(category), 10)
	p.line = append(p.line, " expected="...)
	p.line = strconv.AppendUint(p.line, expected, 10)
	p.line = append(p.line, " got="...)
	p.line = strconv.AppendUint(p.line, got, 10)
	p.line = append(p.line, '\n')
	p.out.Write(p.line)
}

func (p *pipeline) printHeader() {
	if p.opt.format == "csv" && !p.opt.quiet && p.opt.decode != "none" {
		p.out.WriteString(csvHeader)
	}
}

// summary is the closing line.
func (p *pipeline) summary(a *mirror.Assembler, elapsed time.Duration) string {
	st := a.Stats()
	records := p.trades + p.orders
	secs := elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(records) / secs
	}
	s := fmt.Sprintf("summary: %d records (%d trades, %d orders), %d frames, %d flow directions, %d bytes delivered, %d gaps (%d bytes), %d anomalies, %d duplicates, %d step sequence gaps, %d decode errors, %.0f records/s (%.3f s)",
		records, p.trades, p.orders, st.Frames, st.Flows, st.DeliveredBytes, st.Gaps, st.GapBytes,
		st.OverlapAnomalies, st.Duplicates, p.seqGaps, p.decodeErrors, rate, secs)
	if p.opt.decode == "none" {
		s = fmt.Sprintf("summary: %d frames, %d flow directions, %d bytes delivered, %d gaps (%d bytes), %d anomalies, %d duplicates (decoding off, %.3f s)",
			st.Frames, st.Flows, st.DeliveredBytes, st.Gaps, st.GapBytes, st.OverlapAnomalies, st.Duplicates, secs)
	}
	if dropped := st.Malformed + st.Truncated + st.Fragments + st.IPv4ChecksumBad + st.ChecksumBad + st.UnsupportedLink; dropped > 0 {
		s += fmt.Sprintf(", %d frames dropped (%d malformed, %d truncated, %d fragments, %d bad checksums",
			dropped, st.Malformed, st.Truncated, st.Fragments, st.IPv4ChecksumBad+st.ChecksumBad)
		if st.UnsupportedLink > 0 {
			s += fmt.Sprintf(", %d of an unsupported link type", st.UnsupportedLink)
		}
		s += ")"
	}
	if st.OffloadedDirections > 0 {
		s += fmt.Sprintf(", %d directions checksum-offloaded (bad TCP checksums accepted:", st.OffloadedDirections)
		for _, k := range a.OffloadedFlows() {
			s += " " + k.String()
		}
		s += ")"
	}
	if st.Evictions > 0 || st.BufferFullSkips > 0 {
		s += fmt.Sprintf(", %d flow evictions, %d buffer-full skips", st.Evictions, st.BufferFullSkips)
	}
	if st.BufferTotalSkips > 0 || p.stepDrops > 0 {
		s += fmt.Sprintf(", %d buffer-total skips, %d unfinished STEP messages dropped (%d bytes)", st.BufferTotalSkips, p.stepDrops, p.stepDropBytes)
	}
	return s
}
