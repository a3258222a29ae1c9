// Package capgen generates synthetic Shanghai Stock Exchange Level-2 market-data
// captures for tests, benchmarks, examples/feedgen and the mirrorfeed demo:
// plausible UA3201 trade and UA5801 order records, several per STEP message,
// FAST- and STEP-encoded by fast/sse, carried over TCP flows segmented at MSS 1408 with
// a handshake and a close, impaired as a mirror port impairs them (loss,
// reordering, duplicates, overlapping retransmissions), framed as Ethernet
// (optionally 802.1Q-tagged) IPv4 frames with correct checksums.
//
// Alongside the frames it keeps the truth: every record sent, with the flow
// and the stream byte range of the STEP message that carries it, and per flow
// the stream ranges that no captured segment covers (lost for good).
//
//	f, err := capgen.Generate(capgen.Options{Messages: 1000, Seed: 1, Impair: capgen.Impairments{Loss: 0.01}})
//	err = f.WritePcap(pcapFile)
//	err = f.WriteTruth(truthFile)
//
// The same seed gives the same bytes: randomness comes from math/rand/v2's
// PCG seeded with Options.Seed. The whole capture is built in memory: about
// 250 bytes of frames and as much of stream per STEP message, plus the truth
// (about 4.5 records per message).
package capgen

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/link/pcap"
)

// Defaults for Options.
const (
	// DefaultMSS is the segment size of the mirror TOE paper: the largest
	// multiple of 64 below 1460.
	DefaultMSS = 1408
	// MaxMessages bounds Options.Messages so that a typo cannot ask for
	// tens of gigabytes.
	MaxMessages = 10_000_000
	// MaxFlows bounds Options.Flows.
	MaxFlows = 1000
)

// DefaultStart is the capture time of the first frame when Options.Start is
// zero: the opening of continuous trading, 09:30 in Shanghai, on a Monday.
var DefaultStart = time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)

// Options describes a feed to generate. Zero values select the defaults.
type Options struct {
	// Messages is the number of STEP messages in all, spread round-robin
	// over the flows. Each holds 1 to 8 records of one kind.
	Messages int
	// Seed selects the feed; the same seed gives the same capture.
	Seed uint64
	// Flows is the number of TCP connections, each carrying its own channel
	// (channel = flow index + 1). Default 1.
	Flows int
	// MSS is the largest TCP payload per segment. Default DefaultMSS.
	MSS int
	// VLAN, when not 0, tags every frame with this 802.1Q VLAN ID (1..4094).
	VLAN uint16
	// Impair applies mirror-port impairments to the data segments.
	Impair Impairments
	// WrapISN starts every server sequence number 64 KiB before 2^32, so
	// sequence numbers wrap inside the stream.
	WrapISN bool
	// Start is the capture time of the first frame. Default DefaultStart.
	Start time.Time
}

// Frame is one captured frame.
type Frame struct {
	Time int64  // capture time, ns since the Unix epoch
	Data []byte // Ethernet frame
}

// Flow describes one generated TCP connection; the market data flows from
// Server to Client.
type Flow struct {
	Server, Client Endpoint
	Channel        uint32
	ServerISN      uint32
	StreamBytes    uint64  // bytes the server sent
	Stream         []byte  // those bytes: the STEP messages in order
	Messages       int     // STEP messages
	Records        int     // records in them
	Lost           []Range // stream ranges no captured segment covers, sorted; never nil
}

// Key returns the flow direction that carries the data, written as the
// mirror package writes a flow key: "10.31.0.1:9129->10.32.0.10:50000".
func (f *Flow) Key() string {
	return f.Server.Addr.String() + ":" + strconv.Itoa(int(f.Server.Port)) + "->" +
		f.Client.Addr.String() + ":" + strconv.Itoa(int(f.Client.Port))
}

// Record is one record of the truth.
type Record struct {
	Flow        int    // index in Feed.Flows
	SeqNum      uint64 // STEP MsgSeqNum (34) of the carrying message
	Category    uint32 // STEP category (10142)
	CategorySeq uint64 // STEP per-category sequence (10072)
	Start, End  uint64 // stream byte range [Start, End) of the carrying STEP message
	Index       int    // position of the record in its message, from 0
	Template    int    // TemplateTrade or TemplateOrder
	Trade       *Trade // set when Template is TemplateTrade
	Order       *Order // set when Template is TemplateOrder
}

// Fields returns the record's template-specific fields.
func (r *Record) Fields() any {
	if r.Trade != nil {
		return r.Trade
	}
	return r.Order
}

// Feed is a generated capture and its truth.
type Feed struct {
	Frames  []Frame  // in capture order, timestamps non-decreasing
	Flows   []Flow   // in flow index order
	Records []Record // by flow, then in stream order
}

// Generate builds a feed.
func Generate(opt Options) (*Feed, error) {
	if opt.Flows == 0 {
		opt.Flows = 1
	}
	if opt.MSS == 0 {
		opt.MSS = DefaultMSS
	}
	if opt.Start.IsZero() {
		opt.Start = DefaultStart
	}
	switch {
	case opt.Messages < 0 || opt.Messages > MaxMessages:
		return nil, fmt.Errorf("feed: %d messages: want 0 to %d", opt.Messages, MaxMessages)
	case opt.Flows < 1 || opt.Flows > MaxFlows:
		return nil, fmt.Errorf("feed: %d flows: want 1 to %d", opt.Flows, MaxFlows)
	case opt.MSS < 64 || opt.MSS > 9000:
		return nil, fmt.Errorf("feed: MSS %d: want 64 to 9000", opt.MSS)
	case opt.VLAN > 4094:
		return nil, fmt.Errorf("feed: VLAN ID %d: want 1 to 4094", opt.VLAN)
	}
	if err := opt.Impair.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x7469636b77697265)) // "tickwire"

	f := &Feed{Flows: make([]Flow, opt.Flows)}
	type stamped struct {
		time int64
		flow int
		seg  segment
	}
	var all []stamped
	start := opt.Start.UnixNano()
	for fi := range f.Flows {
		fl := &f.Flows[fi]
		fl.Channel = uint32(fi + 1)
		fl.Server = Endpoint{MAC: [6]byte{0x02, 0x53, 0x53, 0x45, 0, 1}, Addr: netip.AddrFrom4([4]byte{10, 31, 0, 1}), Port: 9129}
		fl.Client = Endpoint{
			MAC:  [6]byte{0x02, 0x76, 0x64, 0x72, byte(fi >> 8), byte(fi)},
			Addr: netip.AddrFrom4([4]byte{10, 32, byte(fi >> 8), byte(10 + fi%200)}),
			Port: uint16(50000 + fi),
		}
		fl.ServerISN = rng.Uint32()
		if opt.WrapISN {
			fl.ServerISN = 1<<32 - 64<<10
		}
		clientISN := rng.Uint32()
		n := opt.Messages / opt.Flows
		if fi < opt.Messages%opt.Flows {
			n++
		}
		// Flows open a few milliseconds apart.
		flowStart := start + int64(fi)*3_000_000
		stream, sends, recs, err := buildStream(rng, fi, fl.Channel, n, flowStart+100_000)
		if err != nil {
			return nil, err
		}
		fl.StreamBytes = uint64(len(stream))
		fl.Stream = stream
		fl.Messages = n
		fl.Records = len(recs)
		f.Records = append(f.Records, recs...)
		end := flowStart + 200_000
		if len(sends) > 0 {
			end = sends[len(sends)-1].when + 500_000
		}
		plan := planFlow(rng, stream, sends, opt.MSS, opt.Impair, fl.ServerISN, clientISN, flowStart, end)
		fl.Lost = plan.lost
		// Capture time: the send time, but never before the previous
		// frame of the flow plus the time a 10G link takes to carry it.
		prev := int64(0)
		for _, sg := range plan.segs {
			t := max(sg.when, prev+int64(1+len(sg.data)/1250)*1000)
			prev = t
			all = append(all, stamped{t, fi, sg})
		}
	}
	slices.SortStableFunc(all, func(a, b stamped) int { return cmp.Compare(a.time, b.time) })

	builders := make([]frameBuilder, opt.Flows)
	for i := range builders {
		builders[i] = frameBuilder{server: f.Flows[i].Server, client: f.Flows[i].Client, vlan: opt.VLAN}
	}
	var arena []byte
	ends := make([]int, len(all))
	for i := range all {
		arena = builders[all[i].flow].appendFrame(arena, &all[i].seg)
		ends[i] = len(arena)
	}
	f.Frames = make([]Frame, len(all))
	prevEnd := 0
	for i := range all {
		f.Frames[i] = Frame{Time: all[i].time, Data: arena[prevEnd:ends[i]:ends[i]]}
		prevEnd = ends[i]
	}
	return f, nil
}

// buildStream produces one flow's server byte stream: n STEP messages of 1 to
// 8 records each (about three order messages to one trade message), encoded
// by sse.FeedEncoder and grouped into application writes of 1 to 4 messages,
// or bursts of 5 to 30.
func buildStream(rng *rand.Rand, flow int, channel uint32, n int, start int64) (stream []byte, sends []send, recs []Record, err error) {
	m := newMarket(rng, channel)
	enc := sse.NewFeedEncoder()
	var trades []sse.Trade
	var orders []sse.Order
	sendLeft := 0
	for i := range n {
		m.advance(250_000)
		enc.Header.SendingTime = appendSendingTime(enc.Header.SendingTime[:0], start+m.clock)
		seq := enc.SeqNum
		count := 1 + rng.IntN(8)
		isTrade := rng.IntN(4) == 0
		msgStart := uint64(len(stream))
		var category uint32
		var catSeq uint64
		if isTrade {
			trades = trades[:0]
			for range count {
				trades = append(trades, m.nextTrade())
			}
			category, catSeq = CategoryTrade, enc.TradeSeq
			stream, err = enc.AppendTrades(stream, trades)
		} else {
			orders = orders[:0]
			for range count {
				orders = append(orders, m.nextOrder())
			}
			category, catSeq = CategoryOrder, enc.OrderSeq
			stream, err = enc.AppendOrders(stream, orders)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("feed: encoding message %d: %w", i+1, err)
		}
		msgEnd := uint64(len(stream))
		for k := range count {
			r := Record{Flow: flow, SeqNum: seq, Category: category, CategorySeq: catSeq, Start: msgStart, End: msgEnd, Index: k}
			if isTrade {
				t := TradeOf(&trades[k])
				r.Template, r.Trade = TemplateTrade, &t
			} else {
				o := OrderOf(&orders[k])
				r.Template, r.Order = TemplateOrder, &o
			}
			recs = append(recs, r)
		}
		if sendLeft == 0 {
			sends = append(sends, send{start: int(msgStart)})
			sendLeft = 1 + rng.IntN(4)
			if rng.IntN(5) == 0 {
				sendLeft = 5 + rng.IntN(26) // a burst fills whole segments
			}
		}
		sendLeft--
		sends[len(sends)-1].end = int(msgEnd)
		sends[len(sends)-1].when = start + m.clock
	}
	return stream, sends, recs, nil
}

// appendSendingTime appends the STEP SendingTime (52) of a capture time in
// Shanghai local time: "YYYYMMDD-HH:MM:SS.sss".
func appendSendingTime(dst []byte, ns int64) []byte {
	t := time.Unix(0, ns).In(shanghai)
	return t.AppendFormat(dst, "20060102-15:04:05.000")
}

var shanghai = time.FixedZone("CST", 8*3600)

// WritePcap writes the frames as a classic pcap file with nanosecond
// timestamps.
func (f *Feed) WritePcap(w io.Writer) error {
	pw, err := pcap.NewWriter(w, layers.LinkTypeEthernet, 0)
	if err != nil {
		return err
	}
	for _, fr := range f.Frames {
		if err := pw.WriteFrame(fr.Time, fr.Data, 0); err != nil {
			return err
		}
	}
	return pw.Flush()
}

// WriteTruth writes the truth as JSON lines: first one line per record,
//
//	{"type":"record","flow":"10.31.0.1:9129->10.32.0.10:50000","seq":1,"category":58,
//	 "category_seq":1,"start":0,"end":187,"index":0,"template":5801,"fields":{...}}
//
// where seq, category and category_seq are the STEP fields 34, 10142 and
// 10072 of the carrying message, [start, end) its byte range in the flow's
// stream (offset 0 is the first byte after the server's SYN), index the
// record's position in it, and fields the Trade or Order; then one line per
// flow,
//
//	{"type":"flow","flow":"...","channel":1,"stream_bytes":N,"messages":M,"records":R,
//	 "lost":[{"offset":O,"length":L}]}
//
// where lost lists the stream ranges that no captured segment covers ([]
// when none).
func (f *Feed) WriteTruth(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // flow keys hold "->": keep them readable, not \u003e
	for i := range f.Records {
		r := &f.Records[i]
		if err := enc.Encode(truthRecord{
			Type: "record", Flow: f.Flows[r.Flow].Key(), SeqNum: r.SeqNum, Category: r.Category,
			CategorySeq: r.CategorySeq, Start: r.Start, End: r.End, Index: r.Index,
			Template: r.Template, Fields: r.Fields(),
		}); err != nil {
			return err
		}
	}
	for i := range f.Flows {
		fl := &f.Flows[i]
		if err := enc.Encode(truthFlow{
			Type: "flow", Flow: fl.Key(), Channel: fl.Channel, StreamBytes: fl.StreamBytes,
			Messages: fl.Messages, Records: fl.Records, Lost: fl.Lost,
		}); err != nil {
			return err
		}
	}
	return nil
}

type truthRecord struct {
	Type        string `json:"type"`
	Flow        string `json:"flow"`
	SeqNum      uint64 `json:"seq"`
	Category    uint32 `json:"category"`
	CategorySeq uint64 `json:"category_seq"`
	Start       uint64 `json:"start"`
	End         uint64 `json:"end"`
	Index       int    `json:"index"`
	Template    int    `json:"template"`
	Fields      any    `json:"fields"`
}

type truthFlow struct {
	Type        string  `json:"type"`
	Flow        string  `json:"flow"`
	Channel     uint32  `json:"channel"`
	StreamBytes uint64  `json:"stream_bytes"`
	Messages    int     `json:"messages"`
	Records     int     `json:"records"`
	Lost        []Range `json:"lost"`
}

// TruthLine is one line of a truth file as read back by ReadTruth: Type is
// "record" or "flow" and only the fields of that type are set.
type TruthLine struct {
	Type        string          `json:"type"`
	Flow        string          `json:"flow"`
	SeqNum      uint64          `json:"seq"`
	Category    uint32          `json:"category"`
	CategorySeq uint64          `json:"category_seq"`
	Start       uint64          `json:"start"`
	End         uint64          `json:"end"`
	Index       int             `json:"index"`
	Template    int             `json:"template"`
	Fields      json.RawMessage `json:"fields"`
	Channel     uint32          `json:"channel"`
	StreamBytes uint64          `json:"stream_bytes"`
	Messages    int             `json:"messages"`
	Records     int             `json:"records"`
	Lost        []Range         `json:"lost"`
}

// ReadTruth reads a truth file written by WriteTruth.
func ReadTruth(r io.Reader) ([]TruthLine, error) {
	dec := json.NewDecoder(r)
	var lines []TruthLine
	for {
		var l TruthLine
		err := dec.Decode(&l)
		if errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return lines, fmt.Errorf("feed: truth line %d: %w", len(lines)+1, err)
		}
		lines = append(lines, l)
	}
}
