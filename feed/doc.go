// Package feed decodes a Shanghai Stock Exchange Level-2 market-data feed
// from captured frames in one call: frames in (from any frame.Source, or one
// at a time with their link type and capture time), typed trades, orders and
// gaps out. It joins the passive TCP reassembler (package mirror) to the
// STEP/FAST decoder (package fast/sse): one sse.FeedDecoder per flow
// direction that carries data, told of every TCP gap (Discontinuity), dropped
// when its direction ends, all sharing one FAST decoder.
//
//	d, err := feed.New(feed.Config{}, handler) // Trade, Order, TCPGap, SequenceGap, FlowStart, FlowEnd
//	...
//	err = d.Run(ctx, src) // a pcap.Reader, an afpacket.Source: until io.EOF
//	d.Close()             // end of input: remaining gaps, every flow ends
//	st := d.Stats()
//
// # Two kinds of gap
//
// A TCP gap (Handler.TCPGap) is a run of stream bytes that the capture never
// held: the mirror port lost every copy of them. Its offset and length are
// in bytes of the flow direction's stream; for every direction the delivered
// bytes and the TCP gaps tile the stream from offset 0 (see package mirror).
//
// A sequence gap (Handler.SequenceGap) is a break in a STEP category's
// message sequence numbers (field 10072): messages of that category that
// were due never arrived whole. A TCP gap usually causes one per category
// whose messages it cut, reported when the category's next message arrives;
// the exchange's own sequence breaks, and the unfinished messages dropped for
// Config.BufferTotal, show up here too.
//
// # Bounds
//
// Memory is bounded by the Config: MaxFlows flow directions (mirror's
// table), BufferPerFlow bytes held out of order per direction, and
// BufferTotal bytes of stream held across all directions, three quarters
// for the reassembly buffers and one quarter for the decoders' unfinished
// STEP messages. Past the second share, the decoders that have held an
// unfinished message longest drop it (Stats.UnfinishedDropped); the lost
// messages show up as sequence gaps. A direction's decoder is made on its
// first delivered byte and costs under 1 KiB besides the unfinished message
// it holds, so directions that carry no data cost their flow state alone.
//
// Steady-state decoding allocates nothing: no allocation per frame, message
// or record once a flow direction has its decoder.
//
// A Decoder is not safe for concurrent use; use one per goroutine (for
// example one per capture queue).
package feed
