package main

import (
	"bufio"
	"fmt"
	"strconv"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/mirror"
)

// pipeline is the feed.Handler: it prints what the feed decoder finds in
// the chosen format. With -raw it is wrapped in a rawPipeline, the
// feed.StreamHandler that also writes each direction's delivered bytes.
type pipeline struct {
	opt  options
	out  *bufio.Writer
	line []byte // reused output line
	raw  *rawWriter
	// rawErr is the first -raw write error; writing stops there.
	rawErr error

	// keyText caches each open direction's key.String(), formatted once;
	// lastKey and lastText are the previous record's, tried first.
	keyText  map[mirror.FlowKey][]byte
	lastKey  mirror.FlowKey
	lastText []byte
}

func newPipeline(o options, out *bufio.Writer) *pipeline {
	p := &pipeline{opt: o, out: out, keyText: map[mirror.FlowKey][]byte{}}
	if o.rawDir != "" {
		p.raw = newRawWriter(o.rawDir)
	}
	return p
}

// handler returns p as the feed decoder's handler: a StreamHandler when
// -raw wants the bytes, so that no call per chunk is made otherwise.
func (p *pipeline) handler() feed.Handler {
	if p.raw != nil {
		return rawPipeline{p}
	}
	return p
}

// feedConfig is the feed decoder's configuration from the flags.
func (o options) feedConfig() feed.Config {
	return feed.Config{
		BufferPerFlow: o.buffer, MaxFlows: o.maxFlows, BufferTotal: o.bufferTotal,
		HoleTimeout: o.holeTimeout, Checksum: o.checksum, History: o.history,
		ReassembleOnly: o.decode == "none",
	}
}

// rawPipeline is a pipeline writing -raw output.
type rawPipeline struct{ *pipeline }

// Data implements feed.StreamHandler.Data.
func (r rawPipeline) Data(k mirror.FlowKey, offset uint64, data []byte, ts int64) {
	if r.rawErr == nil {
		r.rawErr = r.raw.data(k, data)
	}
}

// FlowStart implements feed.Handler.FlowStart.
func (p *pipeline) FlowStart(k mirror.FlowKey, ts int64) {
	if p.raw != nil {
		p.raw.start(k)
	}
}

// FlowEnd implements feed.Handler.FlowEnd.
func (p *pipeline) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	if p.raw != nil {
		if err := p.raw.end(k); err != nil && p.rawErr == nil {
			p.rawErr = err
		}
	}
	delete(p.keyText, k)
	if k == p.lastKey {
		p.lastText = nil
	}
}

// flowText returns k.String() as bytes, formatted once per direction.
func (p *pipeline) flowText(k mirror.FlowKey) []byte {
	if p.lastText != nil && k == p.lastKey {
		return p.lastText
	}
	t, ok := p.keyText[k]
	if !ok {
		t = []byte(k.String())
		p.keyText[k] = t
	}
	p.lastKey, p.lastText = k, t
	return t
}

// TCPGap implements feed.Handler.TCPGap.
func (p *pipeline) TCPGap(k mirror.FlowKey, offset, length uint64, ts int64) {
	if p.raw != nil {
		p.raw.gap(k, offset, length)
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
	p.emit(p.line)
}

// Trade implements feed.Handler.Trade.
func (p *pipeline) Trade(t *sse.Trade, m feed.Meta) {
	if p.opt.quiet {
		return
	}
	flow := p.flowText(m.Flow)
	switch p.opt.format {
	case "text":
		p.line = append(p.line[:0], flow...)
		p.line = append(p.line, ' ')
		p.line = t.AppendText(p.line)
		p.line = append(p.line, '\n')
	case "json":
		p.line = appendTradeJSON(p.line[:0], flow, m.Time, t)
	case "csv":
		p.line = appendTradeCSV(p.line[:0], flow, m.Time, t)
	}
	p.emit(p.line)
}

// Order implements feed.Handler.Order.
func (p *pipeline) Order(o *sse.Order, m feed.Meta) {
	if p.opt.quiet {
		return
	}
	flow := p.flowText(m.Flow)
	switch p.opt.format {
	case "text":
		p.line = append(p.line[:0], flow...)
		p.line = append(p.line, ' ')
		p.line = o.AppendText(p.line)
		p.line = append(p.line, '\n')
	case "json":
		p.line = appendOrderJSON(p.line[:0], flow, m.Time, o)
	case "csv":
		p.line = appendOrderCSV(p.line[:0], flow, m.Time, o)
	}
	p.emit(p.line)
}

// SequenceGap implements feed.Handler.SequenceGap: reported in text
// output, counted in the summary.
func (p *pipeline) SequenceGap(category uint32, expected, got uint64, m feed.Meta) {
	if p.opt.quiet || p.opt.format != "text" {
		return
	}
	p.line = append(p.line[:0], p.flowText(m.Flow)...)
	p.line = append(p.line, " step-sequence-gap category="...)
	p.line = strconv.AppendUint(p.line, uint64(category), 10)
	p.line = append(p.line, " expected="...)
	p.line = strconv.AppendUint(p.line, expected, 10)
	p.line = append(p.line, " got="...)
	p.line = strconv.AppendUint(p.line, got, 10)
	p.line = append(p.line, '\n')
	p.emit(p.line)
}

// emit writes line, one or more whole records, to the output. When the
// output is shared by the queues of -link dmaring -queues N, the buffer is
// flushed before a line that does not fit, so the shared writer only ever
// gets whole lines and the queues' records never interleave mid-line.
func (p *pipeline) emit(line []byte) {
	if p.out.Available() < len(line) {
		p.out.Flush()
	}
	p.out.Write(line)
}

// finish ends the -raw output.
func (p *pipeline) finish() {
	if p.raw != nil {
		if err := p.raw.close(); err != nil && p.rawErr == nil {
			p.rawErr = err
		}
	}
}

func (p *pipeline) printHeader() {
	if p.opt.format == "csv" && !p.opt.quiet && p.opt.decode != "none" {
		p.out.WriteString(csvHeader)
	}
}

// summary is the closing line, from the decoders' counters and checksum-
// offloaded flow directions (summed over the queues of -queues N).
func (p *pipeline) summary(fst feed.Stats, offloaded []mirror.FlowKey, elapsed time.Duration) string {
	st := fst.Mirror
	records := fst.Trades + fst.Orders
	secs := elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(records) / secs
	}
	s := fmt.Sprintf("summary: %d records (%d trades, %d orders), %d frames, %d flow directions, %d bytes delivered, %d gaps (%d bytes), %d anomalies, %d duplicates, %d step sequence gaps, %d decode errors, %.0f records/s (%.3f s)",
		records, fst.Trades, fst.Orders, st.Frames, st.Flows, st.DeliveredBytes, st.Gaps, st.GapBytes,
		st.OverlapAnomalies, st.Duplicates, fst.SequenceGaps, fst.DecodeErrors, rate, secs)
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
		for _, k := range offloaded {
			s += " " + k.String()
		}
		s += ")"
	}
	if st.Evictions > 0 || st.BufferFullSkips > 0 {
		s += fmt.Sprintf(", %d flow evictions, %d buffer-full skips", st.Evictions, st.BufferFullSkips)
	}
	if st.FlowsRefused > 0 {
		s += fmt.Sprintf(", %d segments of flows refused by -max-flows across queues", st.FlowsRefused)
	}
	if st.BufferTotalSkips > 0 || fst.UnfinishedDropped > 0 {
		s += fmt.Sprintf(", %d buffer-total skips, %d unfinished STEP messages dropped (%d bytes)", st.BufferTotalSkips, fst.UnfinishedDropped, fst.UnfinishedDroppedBytes)
	}
	return s
}
