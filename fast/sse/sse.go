// Package sse decodes and encodes the Shanghai Stock Exchange (SSE) Level-2
// tick-by-tick feed: FAST templates 3201 (UA3201, trades, STEP category 7)
// and 5801 (UA5801, orders, STEP category 58) carried in STEP messages.
//
// The typed path is generated: sse_gen.go comes from templates.xml through
// the fastgen command (go generate), and holds the Trade and Order structs,
// a Decoder that decodes one record into them without allocating, and an
// Encoder with minimal presence maps. A user with SSE's official template
// file annotates it as templates.xml is annotated and regenerates instead of
// editing code. The same XML, TemplatesXML, loads into package fast's
// generic decoder.
//
// Decoder.DecodeRecords, which FeedDecoder calls for every STEP message,
// decodes a payload's records in one call: on amd64 with AVX2 and BMI2 an
// assembly kernel (package fast/internal/stopbit) first splits the whole
// payload into its stop-bit fields, values packed, and the generated code
// takes them field by field (the token path); elsewhere the generated code
// finds each record's fields itself (the window path). Both fall back to
// the careful code for anything unusual and decode exactly alike.
//
// FeedDecoder is the feed-level API: it takes the STEP byte stream in chunks
// of any size (package step frames it), resets the FAST dictionary for every
// STEP message (the SSE rule: operator scope is one STEP message), decodes
// every record of the FAST payload and calls a FeedHandler:
//
//	fd := sse.NewFeedDecoder(sse.FeedConfig{}, handler) // OnTrade, OnOrder, OnGap
//	for chunk := range tcpStream {
//		if err := fd.Feed(chunk); err != nil {
//			log.Print(err) // counted in fd.Stats(); decoding goes on
//		}
//	}
//
// A handler that also has OnStep (StepHandler) sees each STEP message's
// header and stream offset before its records. After a TCP gap, call
// Discontinuity: decoding resumes at the next STEP message and the lost
// messages show up through OnGap.
//
// FeedEncoder is the reverse, for feed generators and tests: records in,
// STEP messages out:
//
//	fe := sse.NewFeedEncoder()
//	stream, err := fe.AppendTrades(stream, trades) // one STEP message, category 7
//	stream, err = fe.AppendOrders(stream, orders)  // one STEP message, category 58
//
// # What is reconstructed
//
// SSE does not publish its template file. templates.xml is built from the
// public evidence (kept with the project's shared test data, EVIDENCE.md):
//
//   - Observed: the STEP envelope and its fields, the categories (3201 is 7,
//     5801 is 58), per-category sequence numbers in 10072, one FAST message
//     per STEP message holding one or more records, the dictionary reset per
//     STEP message, truncated presence maps, the template id wire bytes
//     (19 81 and 2d a9), and the field names and types of both templates
//     with their implied decimals (price 3, quantity 3, money 5).
//   - Observed for the legacy 3201 only: the ids and operators of
//     DataStatus (optional default), TradeIndex (increment), TradeChannel
//     (copy), SecurityID (copy), TradeTime (copy) and TradePrice, TradeQty,
//     TradeMoney (optional default).
//   - Chosen by tickwire: the operators and presence of the fields added
//     later to 3201 (TradeBuyNo, TradeSellNo and TradeBSFlag optional
//     default, BizIndex mandatory increment) and of every 5801 field
//     (OrderIndex and BizIndex increment; OrderChannel, SecurityID,
//     OrderTime, OrderType and OrderBSFlag copy; OrderNO none; OrderPrice and
//     Balance optional default), following the operators SSE says it uses
//     (default, copy, increment, constant) and the legacy 3201 pattern. The
//     STEP tag numbers of those fields are unknown and left out.
//
// The template names (UA3201, UA5801), the Go names (twf:goType Trade and
// Order) and the fixed lengths (twf:fixedLen) are tickwire's annotations. The
// Encoder leaves a repeated template id out (its pmap bit clear, as the spec's
// copy rule allows); set Encoder.ExplicitTemplateID to send it in every
// record.
//
// Prices, quantities and amounts are fixed-point integers (Price, Qty,
// Money); times are HHMMSSss (Time). SecurityID is a [6]byte array and the
// one-character flags are bytes, so decoding allocates nothing.
package sse

import _ "embed"

//go:generate go run ../cmd/fastgen -in templates.xml -pkg sse -out sse_gen.go

// TemplatesXML is the FAST template file the typed code is generated from,
// for package fast's generic decoder or for tools.
//
//go:embed templates.xml
var TemplatesXML []byte

// STEP categories (field 10142) of the generated templates.
const (
	CategoryTrade = 7
	CategoryOrder = 58
)
