package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

const (
	mirrorMSS    = 1408 // the seed's segment size
	mirrorFrames = 4096 // segments per pass
	tradeFrames  = 4096 // one-trade frames per pass in wire_to_trade
	feedMessages = 4000 // STEP messages decoded per pass in fast_sse_decode
)

// ---- mirror_reassembly ----

// mirrorPayloads returns mirrorFrames random segments of mirrorMSS bytes
// and the order to send them in: adjacent pairs swapped with probability
// reorder, so every pass ends with no hole left.
func mirrorPayloads(reorder float64) ([][]byte, []int) {
	rng := rand.New(rand.NewPCG(1, 2))
	payloads := make([][]byte, mirrorFrames)
	order := make([]int, mirrorFrames)
	for i := range payloads {
		payloads[i] = make([]byte, mirrorMSS)
		for j := range payloads[i] {
			payloads[i][j] = byte(rng.Uint32())
		}
		order[i] = i
	}
	for i := 0; i+1 < len(order); i++ {
		if rng.Float64() < reorder {
			order[i], order[i+1] = order[i+1], order[i]
			i++
		}
	}
	return payloads, order
}

// countHandler counts what a mirror.Assembler delivers.
type countHandler struct{ bytes, gaps uint64 }

func (h *countHandler) FlowStart(mirror.FlowKey, int64)                    {}
func (h *countHandler) Data(_ mirror.FlowKey, _ uint64, d []byte, _ int64) { h.bytes += uint64(len(d)) }
func (h *countHandler) Gap(mirror.FlowKey, uint64, uint64, int64)          { h.gaps++ }
func (h *countHandler) FlowEnd(mirror.FlowKey, mirror.EndReason, int64)    {}

// gopacketSide is gopacket's allocation-free layer decoder feeding its
// reassembly.Assembler, the way a gopacket program reassembles.
type gopacketSide struct {
	asm     *reassembly.Assembler
	parser  *gopacket.DecodingLayerParser
	eth     layers.Ethernet
	ip      layers.IPv4
	tcp     layers.TCP
	decoded []gopacket.LayerType
	ctx     gpContext
	verify  bool // check the IPv4 and TCP checksums first, as mirror's default mode does
}

type gpContext struct{ ci gopacket.CaptureInfo }

func (c *gpContext) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

// gpFactory makes streams that hand every reassembled chunk to data.
type gpFactory struct{ data func([]byte) }

func (f *gpFactory) New(_, _ gopacket.Flow, _ *layers.TCP, _ reassembly.AssemblerContext) reassembly.Stream {
	return &gpStream{data: f.data}
}

type gpStream struct{ data func([]byte) }

func (s *gpStream) Accept(_ *layers.TCP, _ gopacket.CaptureInfo, _ reassembly.TCPFlowDirection, _ reassembly.Sequence, start *bool, _ reassembly.AssemblerContext) bool {
	*start = true
	return true
}

func (s *gpStream) ReassembledSG(sg reassembly.ScatterGather, _ reassembly.AssemblerContext) {
	n, _ := sg.Lengths()
	if n > 0 {
		s.data(sg.Fetch(n))
	}
}

func (s *gpStream) ReassemblyComplete(reassembly.AssemblerContext) bool { return false }

func newGopacketSide(data func([]byte)) *gopacketSide {
	g := &gopacketSide{asm: reassembly.NewAssembler(reassembly.NewStreamPool(&gpFactory{data: data}))}
	g.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &g.eth, &g.ip, &g.tcp)
	g.parser.IgnoreUnsupported = true
	g.decoded = make([]gopacket.LayerType, 0, 4)
	// Only fails for a network layer other than IPv4 or IPv6.
	_ = g.tcp.SetNetworkLayerForChecksum(&g.ip)
	return g
}

func (g *gopacketSide) handle(frame []byte, ts int64) error {
	if err := g.parser.DecodeLayers(frame, &g.decoded); err != nil {
		return err
	}
	if g.verify {
		if err, r := g.ip.VerifyChecksum(); err != nil || !r.Valid {
			return fmt.Errorf("gopacket: bad IPv4 checksum (%v)", err)
		}
		if err, r := g.tcp.VerifyChecksum(); err != nil || !r.Valid {
			return fmt.Errorf("gopacket: bad TCP checksum (%v)", err)
		}
	}
	g.ctx.ci.Timestamp = time.Unix(0, ts)
	g.asm.AssembleWithContext(g.ip.NetworkFlow(), &g.tcp, &g.ctx)
	return nil
}

// mirrorWork says which checksum work both sides of a mirror measure do.
type mirrorWork int

const (
	// mirrorDefault: mirror's default mode (checksums verified) against
	// gopacket as a program uses it (no checksum verified).
	mirrorDefault mirrorWork = iota
	// mirrorNoChecksums: matched work, no checksum verified on either side
	// (mirror.ChecksumIgnore).
	mirrorNoChecksums
	// mirrorChecksums: matched work, both verify the IPv4 and TCP checksums
	// of every frame (gopacket with its own VerifyChecksum methods).
	mirrorChecksums
)

func setupMirror(reorder float64, work mirrorWork) func(p params) (*pair, error) {
	return func(p params) (*pair, error) {
		payloads, order := mirrorPayloads(reorder)
		twFrames, err := buildFlow(payloads, order)
		if err != nil {
			return nil, err
		}
		gpFrames, err := buildFlow(payloads, order)
		if err != nil {
			return nil, err
		}
		h := &countHandler{}
		var cfg mirror.Config
		if work == mirrorNoChecksums {
			cfg.Checksum = mirror.ChecksumIgnore
		}
		asm, err := mirror.New(cfg, h)
		if err != nil {
			return nil, err
		}
		if err := asm.HandleFrame(twFrames.syn, 1); err != nil {
			return nil, err
		}
		var gpBytes uint64
		gp := newGopacketSide(func(b []byte) { gpBytes += uint64(len(b)) })
		gp.verify = work == mirrorChecksums
		if err := gp.handle(gpFrames.syn, 1); err != nil {
			return nil, err
		}
		rate := func(f *flowFrames, handle func([]byte, int64) error, delivered *uint64) (sample, error) {
			before := *delivered
			m0 := mallocs()
			n, timed, err := f.passes(p.dur, handle)
			s := sample{ops: n, allocs: mallocs() - m0, value: float64(n) / timed.Seconds()}
			if err == nil && *delivered-before != uint64(n)*mirrorMSS {
				err = fmt.Errorf("delivered %d bytes of %d", *delivered-before, n*mirrorMSS)
			}
			return s, err
		}
		return &pair{
			tickwire: func() (sample, error) {
				s, err := rate(twFrames, asm.HandleFrame, &h.bytes)
				if err == nil && h.gaps != 0 {
					err = fmt.Errorf("mirror reported %d gaps", h.gaps)
				}
				return s, err
			},
			baseline: func() (sample, error) { return rate(gpFrames, gp.handle, &gpBytes) },
			close:    func() { asm.Close() },
		}, nil
	}
}

// ---- fast_sse_decode ----

// feedStream returns the STEP byte stream of a generated SSE feed (orders
// and trades, 1 to 8 records per message), rebuilt from its frames by the
// mirror reassembler, and its record count.
func feedStream(messages int) ([]byte, int, error) {
	f, err := capgen.Generate(capgen.Options{Messages: messages, Seed: 1})
	if err != nil {
		return nil, 0, err
	}
	h := &streamHandler{}
	asm, err := mirror.New(mirror.Config{}, h)
	if err != nil {
		return nil, 0, err
	}
	for _, fr := range f.Frames {
		if err := asm.HandleFrame(fr.Data, fr.Time); err != nil {
			return nil, 0, err
		}
	}
	asm.Close()
	if h.gaps != 0 {
		return nil, 0, fmt.Errorf("feed stream has %d gaps", h.gaps)
	}
	return h.stream, len(f.Records), nil
}

type streamHandler struct {
	stream []byte
	gaps   int
}

func (h *streamHandler) FlowStart(mirror.FlowKey, int64) {}
func (h *streamHandler) Data(_ mirror.FlowKey, _ uint64, d []byte, _ int64) {
	h.stream = append(h.stream, d...)
}
func (h *streamHandler) Gap(mirror.FlowKey, uint64, uint64, int64)       { h.gaps++ }
func (h *streamHandler) FlowEnd(mirror.FlowKey, mirror.EndReason, int64) {}

// recordCounter is a FeedHandler that counts records.
type recordCounter struct{ records int64 }

func (c *recordCounter) OnTrade(*sse.Trade)           { c.records++ }
func (c *recordCounter) OnOrder(*sse.Order)           { c.records++ }
func (c *recordCounter) OnGap(uint32, uint64, uint64) {}

// genericFeed is the baseline decoding path: package step frames the
// stream and package fast's generic (interpreting) decoder decodes each
// message's records, the dictionary reset per message as SSE requires.
type genericFeed struct {
	parser  *step.Parser
	dec     *fast.Decoder
	msg     fast.Message
	records int64
	onTrade func()
}

func newGenericFeed() (*genericFeed, error) {
	ts, err := fast.ParseTemplates(sse.TemplatesXML)
	if err != nil {
		return nil, err
	}
	dec, err := fast.NewDecoder(ts, nil)
	if err != nil {
		return nil, err
	}
	return &genericFeed{parser: step.NewParser(step.Config{}), dec: dec}, nil
}

func (g *genericFeed) feed(chunk []byte) error {
	g.parser.Feed(chunk)
	for {
		m, err := g.parser.Next()
		if err != nil {
			return err
		}
		if m == nil {
			return nil
		}
		g.dec.Reset()
		for p := m.Payload; len(p) > 0; {
			n, err := g.dec.Decode(p, &g.msg)
			if err != nil {
				return err
			}
			p = p[n:]
			if g.msg.TemplateID == fast.ResetTemplateID {
				continue
			}
			g.records++
			if g.msg.TemplateID == sse.TradeTemplateID && g.onTrade != nil {
				g.onTrade()
			}
		}
	}
}

func setupFastDecode(p params) (*pair, error) {
	stream, records, err := feedStream(feedMessages)
	if err != nil {
		return nil, err
	}
	counter := &recordCounter{}
	typed := sse.NewFeedDecoder(sse.FeedConfig{}, counter)
	generic, err := newGenericFeed()
	if err != nil {
		return nil, err
	}
	// Both decoders get the stream in segment-sized chunks, as from TCP.
	decodeFor := func(feedChunk func([]byte) error, count *int64) (sample, error) {
		before := *count
		m0 := mallocs()
		var timed time.Duration
		passes := 0
		for timed < p.dur {
			start := time.Now()
			for off := 0; off < len(stream); off += mirrorMSS {
				if err := feedChunk(stream[off:min(off+mirrorMSS, len(stream))]); err != nil {
					return sample{}, err
				}
			}
			timed += time.Since(start)
			passes++
		}
		n := *count - before
		if n != int64(passes*records) {
			return sample{}, fmt.Errorf("decoded %d records, want %d", n, passes*records)
		}
		return sample{ops: n, allocs: mallocs() - m0, value: float64(n) / timed.Seconds()}, nil
	}
	return &pair{
		tickwire: func() (sample, error) {
			return decodeFor(func(b []byte) error { typed.Feed(b); return nil }, &counter.records)
		},
		baseline: func() (sample, error) { return decodeFor(generic.feed, &generic.records) },
		close:    func() {},
	}, nil
}

// ---- wire_to_trade ----

// tradePayloads returns tradeFrames STEP messages of one trade each.
func tradePayloads() ([][]byte, error) {
	enc := sse.NewFeedEncoder()
	enc.Header.SendingTime = []byte("20260302-09:30:00.000")
	out := make([][]byte, tradeFrames)
	tr := []sse.Trade{{
		TradeIndex: 1, SecurityID: [6]byte{'6', '0', '0', '0', '0', '0'},
		TradeChannel: 1, HasTradeChannel: true, TradeTime: 9300000, HasTradeTime: true,
		TradePrice: 10250, HasTradePrice: true, TradeQty: 100000, HasTradeQty: true,
		TradeMoney: 102500000, HasTradeMoney: true, TradeBSFlag: 'B', HasTradeBSFlag: true,
		BizIndex: 1,
	}}
	for i := range out {
		tr[0].TradeIndex = uint32(i + 1)
		tr[0].BizIndex = uint64(i + 1)
		tr[0].TradePrice = sse.Price(10250 + i%50*10)
		msg, err := enc.AppendTrades(nil, tr)
		if err != nil {
			return nil, err
		}
		out[i] = msg
	}
	return out, nil
}

var errFull = errors.New("latency samples full")

func setupWireToTrade(p params) (*pair, error) {
	payloads, err := tradePayloads()
	if err != nil {
		return nil, err
	}
	twFrames, err := buildFlow(payloads, nil)
	if err != nil {
		return nil, err
	}
	gpFrames, err := buildFlow(payloads, nil)
	if err != nil {
		return nil, err
	}

	stamper := &tradeStamper{}
	fd, err := feed.New(feed.Config{}, stamper)
	if err != nil {
		return nil, err
	}
	twHandle := func(f []byte, ts int64) error { return fd.HandleFrame(frame.LinkTypeEthernet, f, ts) }
	if err := twHandle(twFrames.syn, 1); err != nil {
		return nil, err
	}

	generic, err := newGenericFeed()
	if err != nil {
		return nil, err
	}
	var gpTrade time.Time
	var gpErr error
	generic.onTrade = func() { gpTrade = time.Now() }
	gp := newGopacketSide(func(b []byte) {
		if err := generic.feed(b); err != nil && gpErr == nil {
			gpErr = err
		}
	})
	if err := gp.handle(gpFrames.syn, 1); err != nil {
		return nil, err
	}

	// latencies replays f through handle, timing each frame from the call
	// to the trade callback's stamp.
	latencies := func(f *flowFrames, handle func([]byte, int64) error, stamp *time.Time) (sample, error) {
		s := sample{lat: make([]time.Duration, 0, min(maxLatencySamples, max(1024, int(p.dur/(200*time.Nanosecond)))))}
		m0 := mallocs()
		_, _, err := f.passes(p.dur, func(frame []byte, ts int64) error {
			if len(s.lat) == cap(s.lat) {
				return errFull
			}
			*stamp = time.Time{}
			t0 := time.Now()
			if err := handle(frame, ts); err != nil {
				return err
			}
			if stamp.IsZero() {
				return errors.New("frame delivered no trade")
			}
			s.lat = append(s.lat, stamp.Sub(t0))
			return nil
		})
		s.allocs = mallocs() - m0
		s.ops = int64(len(s.lat))
		if errors.Is(err, errFull) {
			err = nil
		}
		return s, err
	}
	return &pair{
		tickwire: func() (sample, error) { return latencies(twFrames, twHandle, &stamper.lastTrade) },
		baseline: func() (sample, error) {
			s, err := latencies(gpFrames, gp.handle, &gpTrade)
			if err == nil {
				err = gpErr
			}
			return s, err
		},
		close: func() { fd.Close() },
	}, nil
}

// tradeStamper is the feed.Handler of wire_to_trade: it stamps the time of
// the last trade.
type tradeStamper struct {
	feed.HandlerFuncs
	lastTrade time.Time
}

func (s *tradeStamper) Trade(*sse.Trade, feed.Meta) { s.lastTrade = time.Now() }
