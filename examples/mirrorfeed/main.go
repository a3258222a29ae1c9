// Command mirrorfeed is tickwire's passive market-data path end to end:
// frames from a mirror port or a capture file are reassembled per TCP flow
// direction (package mirror), the in-order bytes are decoded as the Shanghai
// Stock Exchange STEP/FAST Level-2 feed (package fast/sse), both joined by
// package feed, and every trade and order is printed.
//
//	go run ./examples/mirrorfeed                  # a small feed embedded in the binary
//	go run ./examples/mirrorfeed -pcap feed.pcap  # pcap (4 variants) or pcapng, gzip too
//	go run ./examples/mirrorfeed -iface eth1      # live AF_PACKET capture (root), ^C ends
//	go run ./examples/mirrorfeed -link dmaring -pcap feed.pcap  # the capture through DMA rings
//	go run ./examples/mirrorfeed -xdp eth1 -filter 10.31.0.1:9129  # live AF_XDP capture (root)
//
// After the records it prints a summary line: records, flows, bytes
// delivered, gaps, overlap anomalies, STEP sequence gaps, decode errors and
// records per second of wall time. A progress line goes to stderr every
// second on long inputs. Captures may be Ethernet, Linux cooked (tcpdump -i
// any: LINUX_SLL, LINUX_SLL2) or raw IP (RAW, IPV4); the same traffic
// decodes the same in each. A capture that cannot be read (not a capture,
// truncated, corrupt, or of another link type, which the error names) is
// reported on stderr with a non-zero exit status, after the summary of what
// was read before the fault.
//
// Flags:
//
//	-format text|json|csv  record output (text by default). json prints one
//	                       object per line: {"type":"trade"|"order","flow":...,
//	                       "ts":capture ns,"template":3201|5801,"fields":{...}}
//	                       with the fields of internal/capgen's Trade and Order
//	                       (integers with implied decimals), and
//	                       {"type":"gap","flow":...,"offset":N,"length":M} for
//	                       every skipped hole; csv prints a header and one row
//	                       per record. With json and csv the summary goes to
//	                       stderr, so stdout stays machine-readable.
//	-quiet                 print no records, only the summary
//	-decode sse|none       none switches market-data decoding off: any TCP
//	                       payload is reassembled (useful with -raw)
//	-raw DIR               write, per flow direction that delivered data,
//	                       DIR/<srcIP>_<srcPort>-<dstIP>_<dstPort>.bin holding
//	                       the delivered bytes in stream order (gaps are not
//	                       filled in: the file is the concatenation of the
//	                       delivered bytes) and DIR/<same>.gaps.json, a JSON
//	                       array of {"offset": N, "length": M} in stream
//	                       offsets ([] when there is none). A later connection
//	                       on the same addresses and ports (a new SYN) is
//	                       written to <same>.2.bin and so on, never over the
//	                       first one.
//	-buffer BYTES          bytes held out of order per flow direction
//	                       (mirror.Config.BufferPerFlow, default 32 KiB)
//	-checksum auto|verify|ignore  checksum policy (mirror.Config.Checksum)
//	-hole-timeout D        capture time a hole is waited for (default 100ms)
//	-max-flows N           flow directions tracked at once (default 1024); each
//	                       costs about 200 bytes, and one that carries data
//	                       about 1 KiB more for its decoder while it lives
//	-buffer-total BYTES    bound on the stream bytes held in memory across
//	                       all flow directions (default 64 MiB, raised to
//	                       4/3 of -buffer when that is larger): three
//	                       quarters for the reassembly buffers
//	                       (mirror.Config.MaxBufferTotal), one quarter for
//	                       the decoders' unfinished STEP messages. Past it
//	                       the least recently active directions' holes are
//	                       skipped and reported as gaps, and the unfinished
//	                       messages held longest are dropped (they show up as
//	                       STEP sequence gaps); the summary then counts both
//	-history=false         do not keep the last -buffer delivered bytes per
//	                       direction (kept as far as -buffer-total allows
//	                       buffers for them): retransmissions of delivered bytes are
//	                       then not compared, so a differing one is counted as
//	                       a duplicate, not an anomaly (saves one copy per byte)
//
//	-link dmaring          replay the input (the capture file or the embedded
//	                       feed; Ethernet frames up to 16 KiB) through a
//	                       software NIC (link/dmaring/nicsim) into a
//	                       link/dmaring RX ring, stamped with the capture
//	                       times and without loss, and decode what is read
//	                       from the ring: the records, -raw files and
//	                       summary are those of the direct path
//	-queues N              RX queues of -link dmaring (1 to 64): the NIC
//	                       spreads the flow directions over them by RSS and
//	                       each queue has its own reader goroutine and
//	                       decoder (flow state per queue); the records are
//	                       those of one queue, in another order across flow
//	                       directions but the same order within each, and
//	                       the summary sums the queues. -max-flows and the
//	                       reassembly share of -buffer-total bound all the
//	                       queues together (mirror.Budget: any one queue may
//	                       use all of them); the STEP share is split
//	                       equally; no progress line is shown. With -xdp:
//	                       the receive queues 0 to N-1 bound, one AF_XDP
//	                       socket each (default 1)
//	-xdp IFACE             capture live from IFACE over AF_XDP (link/afxdp)
//	                       instead of AF_PACKET; every other flag and the
//	                       output are as with -iface. AF_XDP takes the
//	                       frames it captures away from the kernel, so
//	                       -filter is required
//	-filter HOST:PORT      with -xdp: capture IPv4 frames from or to HOST
//	                       whose TCP or UDP source or destination port is
//	                       PORT; either may be * (not both)
//
// The stream semantics (stream start, first copy wins, gaps) are the mirror
// package's; see its documentation.
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/link/afpacket"
	"github.com/tickwire/tickwire/link/afxdp"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/mirror"
)

// demoPcap is the embedded demo feed: two channels, 800 STEP messages, light
// mirror impairments including a little loss, so the summary shows gaps
// being reported rather than hidden. TestDemoPcapIsGenerated checks that it
// is exactly what this line writes:
//
//go:generate go run ../feedgen -o demo.pcap -truth - -messages 800 -seed 2026 -flows 2 -loss 0.005 -reorder 0.02 -dup 0.02 -overlap 0.02
//go:embed demo.pcap
var demoPcap []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	pcapFile    string
	iface       string
	format      string
	decode      string
	rawDir      string
	quiet       bool
	buffer      int
	holeTimeout time.Duration
	checksum    mirror.ChecksumMode
	history     bool
	maxFlows    int
	bufferTotal int64
	link        string // "" (the source read directly) or "dmaring"
	queues      int    // of -link dmaring or -xdp
	xdp         string
	filter      string
	// stepBudget is the decoders' share of bufferTotal, as package feed
	// splits it (feed.Config.BufferTotal); the reassembly buffers get the
	// rest. Only -buffer-total's usage check needs it.
	stepBudget int
}

// defaultBufferTotal is -buffer-total's default.
const defaultBufferTotal = 64 << 20

// run is the whole program; it returns the exit status: 0, 1 when the input
// failed, 2 for bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mirrorfeed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.pcapFile, "pcap", "", "read a pcap or pcapng `file` instead of the embedded demo feed")
	fs.StringVar(&o.iface, "iface", "", "capture live from `interface` with AF_PACKET (root); ^C ends")
	fs.StringVar(&o.format, "format", "text", "record output: text, json or csv")
	fs.StringVar(&o.decode, "decode", "sse", "sse: decode STEP/FAST Level-2 records; none: reassemble only")
	fs.StringVar(&o.rawDir, "raw", "", "write each flow direction's delivered bytes and gaps to `dir`")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the summary, no records")
	fs.IntVar(&o.buffer, "buffer", mirror.DefaultBufferPerFlow, "`bytes` held out of order per flow direction")
	fs.DurationVar(&o.holeTimeout, "hole-timeout", mirror.DefaultHoleTimeout, "capture time a hole is waited for")
	fs.Var(&o.checksum, "checksum", "checksum policy: auto, verify or ignore")
	fs.IntVar(&o.maxFlows, "max-flows", mirror.DefaultMaxFlows, "flow directions tracked at once (the least recently active is evicted)")
	fs.BoolVar(&o.history, "history", true, "compare retransmissions of delivered bytes with them (count differing ones as anomalies)")
	fs.Int64Var(&o.bufferTotal, "buffer-total", defaultBufferTotal, "`bytes` of stream held in memory across all flow directions (3/4 reassembly, 1/4 STEP decoding)")
	fs.StringVar(&o.link, "link", "", "dmaring: replay the capture through a software NIC into link/dmaring RX rings and read it from there")
	fs.IntVar(&o.queues, "queues", 1, "RX queues of -link dmaring, or with -xdp receive queues 0 to `N`-1, one AF_XDP socket each")
	fs.StringVar(&o.xdp, "xdp", "", "capture live from `interface` over AF_XDP (root; needs -filter); ^C ends")
	fs.StringVar(&o.filter, "filter", "", "with -xdp: capture frames from or to `HOST:PORT` (either may be *)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	totalSet := false
	fs.Visit(func(f *flag.Flag) { totalSet = totalSet || f.Name == "buffer-total" })
	if !totalSet {
		o.bufferTotal = max(o.bufferTotal, (int64(o.buffer)*4+2)/3)
	}
	o.stepBudget = int(o.bufferTotal / 4)
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "mirrorfeed: "+msg)
		return 2
	}
	switch {
	case fs.NArg() != 0:
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case o.pcapFile != "" && o.iface != "", o.pcapFile != "" && o.xdp != "", o.iface != "" && o.xdp != "":
		return usage("-pcap, -iface and -xdp are exclusive")
	case o.link != "" && o.link != "dmaring":
		return usage(fmt.Sprintf("-link %q: want dmaring or nothing", o.link))
	case o.link != "" && (o.iface != "" || o.xdp != ""):
		return usage("-link dmaring replays a capture file: not with -iface or -xdp")
	case o.xdp != "" && o.filter == "":
		return usage("-xdp needs -filter HOST:PORT: AF_XDP takes the frames it captures away from the kernel, so there is no capture-everything default")
	case o.xdp == "" && o.filter != "":
		return usage("-filter goes with -xdp")
	case o.xdp == "" && o.link == "" && o.queues != 1:
		return usage("-queues goes with -link dmaring or -xdp")
	case o.queues < 1 || o.queues > 64:
		return usage(fmt.Sprintf("-queues %d: want 1 to 64", o.queues))
	case o.format != "text" && o.format != "json" && o.format != "csv":
		return usage(fmt.Sprintf("-format %q: want text, json or csv", o.format))
	case o.decode != "sse" && o.decode != "none":
		return usage(fmt.Sprintf("-decode %q: want sse or none", o.decode))
	case o.buffer <= 0 || o.buffer > mirror.MaxBufferPerFlow:
		return usage(fmt.Sprintf("-buffer %d: want 1 to %d", o.buffer, mirror.MaxBufferPerFlow))
	case o.holeTimeout <= 0:
		return usage("-hole-timeout must be positive")
	case o.maxFlows <= 0 || o.maxFlows > mirror.MaxMaxFlows:
		return usage(fmt.Sprintf("-max-flows %d: want 1 to %d", o.maxFlows, mirror.MaxMaxFlows))
	case o.bufferTotal-int64(o.stepBudget) < int64(o.buffer) || o.stepBudget < step.DefaultMaxMessageSize ||
		o.bufferTotal-int64(o.stepBudget) > mirror.MaxMaxBufferTotal:
		return usage(fmt.Sprintf("-buffer-total %d: want 4/3 of -buffer (%d) and 256 KiB at least, at most %d",
			o.bufferTotal, o.buffer, int64(mirror.MaxMaxBufferTotal)))
	}
	if o.rawDir != "" {
		if err := os.MkdirAll(o.rawDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "mirrorfeed: -raw: %v\n", err)
			return 1
		}
	}

	src, live, err := openInput(o)
	if err != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
		return 1
	}
	var ring *ringSource
	if o.link == "dmaring" {
		if ring, err = openRing(src, o.queues); err != nil {
			fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
			return 1
		}
		src = ring
	}
	defer src.Close()
	var code int
	if ring != nil && o.queues > 1 {
		code = processQueues(ctx, o, ring, stdout, stderr)
	} else {
		code = process(ctx, o, src, live, frame.NewBatch(batchFrames, slotSize), stdout, stderr)
	}
	if ring != nil && ring.dropped() > 0 {
		fmt.Fprintf(stderr, "mirrorfeed: -link dmaring: %d frames not put on the ring (not Ethernet, or longer than %d bytes)\n", ring.dropped(), dmaring.MaxBufSize)
	}
	return code
}

// process runs the opened source through the reassembler and the pipeline
// and prints the summary; it returns run's exit status. batch is the read
// buffer; it is reused after the call returns.
func process(ctx context.Context, o options, src frame.Source, live bool, batch []frame.Frame, stdout, stderr io.Writer) int {
	if live {
		// Close wakes a blocked ReadFrames, which then ends the loop with
		// io.EOF.
		stopLive := context.AfterFunc(ctx, func() { src.Close() })
		defer stopLive()
		if o.xdp != "" {
			fmt.Fprintf(stderr, "mirrorfeed: capturing on %s (AF_XDP, promiscuous, filter %s, %d queue(s): captured frames no longer reach the kernel); interrupt to stop\n", o.xdp, o.filter, o.queues)
		} else {
			fmt.Fprintf(stderr, "mirrorfeed: capturing on %s (AF_PACKET, promiscuous); interrupt to stop\n", o.iface)
		}
	}

	out := bufio.NewWriterSize(stdout, 64<<10)
	summaryTo := io.Writer(out)
	if o.format != "text" {
		summaryTo = stderr
	}
	p := newPipeline(o, out)
	d, err := feed.New(o.feedConfig(), p.handler())
	if err != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
		return 2
	}
	p.printHeader()

	start := time.Now()
	readErr := pump(ctx, src, batch, d, live, stderr)
	d.Close()
	elapsed := time.Since(start)
	p.finish()

	fmt.Fprintln(summaryTo, p.summary(d.Stats(), d.OffloadedFlows(), elapsed))
	flushErr := out.Flush()
	if readErr != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", readErr)
		return 1
	}
	if err := errors.Join(p.rawErr, flushErr); err != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
		return 1
	}
	return 0
}

// openSource opens the input: the capture file, the live interface, or the
// embedded demo feed.
func openSource(o options) (src frame.Source, live bool, err error) {
	switch {
	case o.xdp != "":
		f, err := parseFilter(o.filter)
		if err != nil {
			return nil, false, err
		}
		s, err := afxdp.NewSource(o.xdp, afxdp.Config{Filter: f, Queues: o.queues, Promiscuous: true, ReadTimeout: 50 * time.Millisecond})
		if err != nil {
			return nil, false, err
		}
		return s, true, nil
	case o.iface != "":
		s, err := afpacket.New(o.iface, afpacket.Config{Promiscuous: true, ReadTimeout: 50 * time.Millisecond})
		return s, true, err
	case o.pcapFile != "":
		r, err := pcap.Open(o.pcapFile)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", o.pcapFile, err)
		}
		return r, false, nil
	default:
		r, err := pcap.NewReader(bytes.NewReader(demoPcap))
		return r, false, err
	}
}

// openInput is openSource; tests wrap it to watch the frames a live
// capture returns.
var openInput = openSource

// parseFilter parses -filter: HOST:PORT, either of them * (or empty).
func parseFilter(s string) (afxdp.Filter, error) {
	var f afxdp.Filter
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return f, fmt.Errorf("-filter %q: want HOST:PORT (either may be *)", s)
	}
	host, port := s[:i], s[i+1:]
	if host != "" && host != "*" {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() {
			return f, fmt.Errorf("-filter %q: host must be an IPv4 address or *", s)
		}
		f.Host = a
	}
	if port != "" && port != "*" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return f, fmt.Errorf("-filter %q: port must be 1 to 65535 or *", s)
		}
		f.Port = uint16(p)
	}
	if f.IsZero() {
		return f, fmt.Errorf("-filter %q: give a host, a port or both", s)
	}
	return f, nil
}

// Batch geometry: slots hold a 64 KiB IP packet behind the longest link
// header decoded (LINUX_SLL2, 20 bytes), so tcpdump's former default snap
// length (64 KiB plus an Ethernet header) is read whole in every link type.
const (
	batchFrames = 64
	slotSize    = 65536 + 20
)

// progressInterval is the wall time between progress lines on stderr.
var progressInterval = time.Second

// pump is the one reader loop for files and live capture: frames from src,
// read into batch, go into the feed decoder, until the end of the file,
// Close (live), or an error. It returns the input's error, nil at a clean
// end. It is feed.Decoder.Run with the command's progress line,
// interruption and error messages.
func pump(ctx context.Context, src frame.Source, batch []frame.Frame, d *feed.Decoder, live bool, stderr io.Writer) error {
	var frames, bytesIn uint64
	lastProgress := time.Now()
	progressShown := false
	defer func() {
		if progressShown {
			fmt.Fprintln(stderr)
		}
	}()
	for {
		n, err := src.ReadFrames(batch)
		for i := range batch[:n] {
			f := &batch[i]
			d.HandleSourceFrame(f) // per-frame errors are counted in d.Stats
			bytesIn += uint64(f.N)
		}
		frames += uint64(n)
		if now := time.Now(); now.Sub(lastProgress) >= progressInterval {
			lastProgress = now
			progressShown = true
			st := d.Stats()
			fmt.Fprintf(stderr, "\rmirrorfeed: %d frames, %.1f MB, %d records...", frames, float64(bytesIn)/1e6, st.Trades+st.Orders)
		}
		switch {
		case err == nil:
			if !live && ctx.Err() != nil {
				return fmt.Errorf("interrupted after %d frames", frames)
			}
		case errors.Is(err, io.EOF):
			return nil
		case live && (errors.Is(err, afpacket.ErrTimeout) || errors.Is(err, afxdp.ErrTimeout)):
			// A quiet link: let capture time advance so holes time out.
			d.Flush(time.Now().UnixNano())
		case live && ctx.Err() != nil:
			return nil
		default:
			return describeReadError(err, frames)
		}
	}
}

// describeReadError turns a reader error into a message that says where the
// capture broke.
func describeReadError(err error, frames uint64) error {
	var rec *pcap.RecordError
	var link *pcap.LinkTypeError
	if errors.As(err, &rec) && errors.As(err, &link) {
		return fmt.Errorf("capture record %d, after %d good frames, cannot be decoded: %w", rec.Record, frames, err)
	}
	if errors.As(err, &rec) {
		what := "corrupt"
		if errors.Is(err, io.ErrUnexpectedEOF) {
			what = "truncated"
		}
		return fmt.Errorf("capture %s at record %d, after %d good frames: %w", what, rec.Record, frames, err)
	}
	return fmt.Errorf("reading the capture after %d frames: %w", frames, err)
}
