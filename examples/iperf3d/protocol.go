package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// The iperf3 control protocol, as iperf3 3.x speaks it (learnt from esnet/iperf
// src/iperf_api.c, iperf_server_api.c, iperf_udp.c): the client opens the
// control connection and sends a 37-byte cookie; from then on the server
// drives the test with one-byte states, and both sides exchange JSON
// objects framed by a 4-byte big-endian length.
//
//	server: PARAM_EXCHANGE         client: {"tcp":true,"time":10,"parallel":1,...}
//	server: CREATE_STREAMS         client: opens the data streams (TCP: connect
//	                                       and send the cookie; UDP: send a
//	                                       4-byte datagram, await the reply)
//	server: TEST_START, TEST_RUNNING
//	        ... data flows (client to server, or server to client with -R) ...
//	client: TEST_END
//	server: EXCHANGE_RESULTS       client: {its results}   server: {its results}
//	server: DISPLAY_RESULTS        client: IPERF_DONE
//
// A client arriving during a test gets ACCESS_DENIED; a test the server
// cannot run gets SERVER_ERROR followed by iperf3's error code and an errno,
// 4 bytes each, big-endian.

// Control states: the byte values iperf3 sends (signed char).
const (
	stateTestStart       = 1
	stateTestRunning     = 2
	stateTestEnd         = 4
	stateParamExchange   = 9
	stateCreateStreams   = 10
	stateClientTerminate = 12
	stateExchangeResults = 13
	stateDisplayResults  = 14
	stateIperfDone       = 16
	stateAccessDenied    = 0xff // -1
	stateServerError     = 0xfe // -2
)

// iperf3's error codes (i_errno) sent with SERVER_ERROR.
const (
	errNumStreams    = 6  // IENUMSTREAMS
	errBlockSize     = 7  // IEBLOCKSIZE
	errUnimplemented = 13 // IEUNIMP
	errUDPBlockSize  = 20 // IEUDPBLOCKSIZE
)

const (
	// DefaultPort is iperf3's port, for the control connection and the
	// data streams (TCP and UDP alike).
	DefaultPort = 5201
	cookieSize  = 37 // an ASCII UUID-like string and its NUL
	// maxJSON bounds a JSON message from the client; iperf3's are a few
	// hundred bytes.
	maxJSON = 1 << 20
	// MaxStreams bounds -P: iperf3's own limit (MAX_STREAMS).
	MaxStreams = 128
	// MaxBlockSize bounds -l (iperf3's MAX_BLOCKSIZE).
	MaxBlockSize    = 1 << 20
	defaultTCPBlock = 128 << 10 // iperf3's DEFAULT_TCP_BLKSIZE
	defaultUDPBlock = 1460      // iperf3's DEFAULT_UDP_BLKSIZE
)

// The UDP "connect" exchange: the client sends the 4 bytes of the integer
// 0x36373839 and the server answers 0x39383736, both in the sender's byte
// order (iperf3 writes them from a native int); every platform iperf3 runs
// on in practice is little-endian.
var udpConnectReply = binary.LittleEndian.AppendUint32(nil, 0x39383736)

// Params are the test parameters the client sends in PARAM_EXCHANGE.
// iperf3 signals a flag by the presence of its key.
type Params struct {
	UDP           bool   // "udp" (else "tcp")
	Reverse       bool   // "reverse": the server sends
	Time          int    // "time": test length in seconds (0 with -n or -k)
	Bytes         uint64 // "num": bytes to send in all (-n), 0 when unset
	Blocks        uint64 // "blockcount": blocks to send in all (-k), 0 when unset
	Omit          int    // "omit": seconds omitted from the client's report
	Parallel      int    // "parallel": number of streams
	BlockSize     int    // "len": bytes per write or per datagram
	Bandwidth     uint64 // "bandwidth": bits/s per stream, 0 for unlimited
	Counters64    bool   // "udp_counters_64bit": 64-bit UDP packet counters
	ClientVersion string // "client_version"
}

// ParamError is a parameter the server refuses, with the iperf3 error code
// it reports to the client.
type ParamError struct {
	Code int
	Msg  string
}

func (e *ParamError) Error() string { return "iperf3d: " + e.Msg }

// ParseParams decodes and checks the client's PARAM_EXCHANGE object.
// Defaults are applied: 1 stream, iperf3's default block sizes.
func ParseParams(b []byte) (Params, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Params{}, fmt.Errorf("iperf3d: parameters: %w", err)
	}
	has := func(k string) bool { _, ok := raw[k]; return ok }
	var err error
	num := func(k string) float64 {
		v, ok := raw[k]
		if !ok || err != nil {
			return 0
		}
		var f float64
		if e := json.Unmarshal(v, &f); e != nil || f < 0 || f > math.MaxInt64 {
			err = fmt.Errorf("iperf3d: parameter %q: %s is not a count", k, v)
		}
		return f
	}
	p := Params{
		UDP:        has("udp"),
		Reverse:    has("reverse"),
		Time:       int(num("time")),
		Bytes:      uint64(num("num")),
		Blocks:     uint64(num("blockcount")),
		Omit:       int(num("omit")),
		Parallel:   int(num("parallel")),
		BlockSize:  int(num("len")),
		Bandwidth:  uint64(num("bandwidth")),
		Counters64: has("udp_counters_64bit") && num("udp_counters_64bit") != 0,
	}
	if err != nil {
		return Params{}, err
	}
	if v, ok := raw["client_version"]; ok {
		json.Unmarshal(v, &p.ClientVersion)
	}
	switch {
	case has("sctp") || (!has("tcp") && !p.UDP):
		return p, &ParamError{errUnimplemented, "only TCP and UDP tests are served"}
	case has("bidirectional"):
		return p, &ParamError{errUnimplemented, "bidirectional tests (--bidir) are not served"}
	}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	if p.Parallel > MaxStreams {
		return p, &ParamError{errNumStreams, fmt.Sprintf("%d streams, at most %d", p.Parallel, MaxStreams)}
	}
	if p.BlockSize == 0 {
		p.BlockSize = defaultTCPBlock
		if p.UDP {
			p.BlockSize = defaultUDPBlock
		}
	}
	if p.BlockSize > MaxBlockSize {
		return p, &ParamError{errBlockSize, fmt.Sprintf("block size %d, at most %d", p.BlockSize, MaxBlockSize)}
	}
	if p.UDP && (p.BlockSize < udpHeaderSize(p.Counters64) || p.BlockSize > 65507) {
		return p, &ParamError{errUDPBlockSize, fmt.Sprintf("UDP block size %d out of range", p.BlockSize)}
	}
	return p, nil
}

// udpHeaderSize is the size of the header iperf3 puts at the start of every
// UDP datagram: seconds and microseconds of the send time, then the packet
// number, all big-endian.
func udpHeaderSize(counters64 bool) int {
	if counters64 {
		return 16
	}
	return 12
}

// putUDPHeader writes the header of datagram number n, sent at t, into b.
func putUDPHeader(b []byte, t time.Time, n uint64, counters64 bool) {
	us := t.UnixMicro()
	binary.BigEndian.PutUint32(b[0:], uint32(us/1e6))
	binary.BigEndian.PutUint32(b[4:], uint32(us%1e6))
	if counters64 {
		binary.BigEndian.PutUint64(b[8:], n)
	} else {
		binary.BigEndian.PutUint32(b[8:], uint32(n))
	}
}

// udpReceiver accounts for the datagrams of one UDP stream the way iperf3's
// receiver does, so the client prints the same loss and jitter figures.
type udpReceiver struct {
	bytes       uint64
	packets     uint64  // highest packet number seen
	lost        int64   // gaps in the numbering, less late arrivals
	outOfOrder  uint64  // datagrams numbered below the highest seen
	jitter      float64 // seconds, smoothed as in RFC 1889 (A.8)
	prevTransit float64
	started     bool
}

// add accounts for one datagram arriving at arrival. A datagram too short
// for the header is counted in bytes only.
func (r *udpReceiver) add(d []byte, arrival time.Time, counters64 bool) {
	r.bytes += uint64(len(d))
	if len(d) < udpHeaderSize(counters64) {
		return
	}
	sec := binary.BigEndian.Uint32(d[0:])
	usec := binary.BigEndian.Uint32(d[4:])
	var n uint64
	if counters64 {
		n = binary.BigEndian.Uint64(d[8:])
	} else {
		n = uint64(binary.BigEndian.Uint32(d[8:]))
	}
	if n >= r.packets+1 {
		r.lost += int64(n - 1 - r.packets)
		r.packets = n
	} else {
		r.outOfOrder++
		if r.lost > 0 {
			r.lost--
		}
	}
	sent := float64(sec) + float64(usec)/1e6
	transit := float64(arrival.UnixMicro())/1e6 - sent
	if !r.started {
		r.started = true
		r.prevTransit = transit
	}
	d2 := math.Abs(transit - r.prevTransit)
	r.prevTransit = transit
	r.jitter += (d2 - r.jitter) / 16
}

// streamResult is one stream in the results object.
type streamResult struct {
	ID          int     `json:"id"`
	Bytes       uint64  `json:"bytes"`
	Retransmits int     `json:"retransmits"`
	Jitter      float64 `json:"jitter"`
	Errors      int64   `json:"errors"`
	Packets     uint64  `json:"packets"`
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"`
}

// results is the object each side sends in EXCHANGE_RESULTS.
type results struct {
	CPUUtilTotal         float64        `json:"cpu_util_total"`
	CPUUtilUser          float64        `json:"cpu_util_user"`
	CPUUtilSystem        float64        `json:"cpu_util_system"`
	SenderHasRetransmits int            `json:"sender_has_retransmits"`
	CongestionUsed       string         `json:"congestion_used,omitempty"`
	Streams              []streamResult `json:"streams"`
}

// streamID is the id iperf3 gives the i-th stream (from 0) of a test: 1,
// then 3, 4, 5, ... (a quirk of iperf_add_stream that both sides share).
func streamID(i int) int {
	if i == 0 {
		return 1
	}
	return i + 2
}

// writeState sends one state byte.
func writeState(w io.Writer, state byte) error {
	_, err := w.Write([]byte{state})
	return err
}

// writeServerError sends SERVER_ERROR with an iperf3 error code and errno.
func writeServerError(w io.Writer, code, errno int) error {
	b := []byte{stateServerError}
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	b = binary.BigEndian.AppendUint32(b, uint32(errno))
	_, err := w.Write(b)
	return err
}

// writeJSON sends v as a length-prefixed JSON object.
func writeJSON(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	_, err = w.Write(append(msg, body...))
	return err
}

// ErrJSONTooLarge is returned by readJSON for a length beyond maxJSON.
var ErrJSONTooLarge = errors.New("iperf3d: JSON message too large")

// readJSON reads one length-prefixed JSON message and returns its bytes.
func readJSON(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxJSON {
		return nil, ErrJSONTooLarge
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	// cJSON tolerates a trailing NUL; encoding/json does not.
	return bytes.TrimRight(body, "\x00"), nil
}
