// Command mcastfeed arbitrates the A and B lines of a MoldUDP64 market-data
// feed sent as UDP multicast, from a capture file, and prints the merged
// stream: one JSON object per delivered message, in sequence order, and one
// per run of messages that neither line delivered.
//
//	go run ./examples/mcastfeed -pcap FILE -line A=239.1.1.1:5000 -line B=239.1.1.2:5000 -format json
//
// Live, as root, on a tickwire stack on a new TAP device whose kernel side
// routes the groups to it (ip route add 224.0.0.0/4 dev NAME):
//
//	go run ./examples/mcastfeed -tap NAME -addr 10.207.0.2/24 -host 10.207.0.1/24 -line A=... -line B=... -format json
//
// Flags:
//
//	-pcap FILE             capture to read (pcap in all variants or pcapng,
//	                       gzip too; Ethernet with up to one VLAN tag, Linux
//	                       cooked or raw IPv4)
//	-line NAME=GROUP:PORT[@SRC]
//	                       a line: the UDP datagrams sent to GROUP:PORT (from
//	                       SRC, when given). Repeat it for every line, in any
//	                       number up to 64. Lines on the same GROUP:PORT must
//	                       each name their source address, or (-iface) be
//	                       captured on different interfaces.
//	-gap-timeout D         how long a missing message is waited for, in capture
//	                       time, before it is declared lost (default 100ms)
//	-format json           output format; json is the only one
//	-tap NAME              live mode: create TAP device NAME, run a tickwire
//	                       stack on it, join every line's group (IGMP) and
//	                       arbitrate in wall time (the frames' receive times)
//	-addr A/P, -host H/P   live: the stack's and the kernel side's addresses
//	                       (default 10.207.0.2/24 and 10.207.0.1/24)
//	-duration D            live: stop after D; otherwise live mode runs until
//	                       SIGINT or SIGTERM, or until the MoldUDP64 session
//	                       has ended and nothing is left to wait for
//
//	-iface IFACE           live mode, passive: join every line's group through
//	                       the host's kernel (it sends the IGMP reports) and
//	                       capture the datagrams from interface IFACE with
//	                       AF_PACKET; the gap timeout runs in capture time,
//	                       advanced by the wall clock on a quiet link
//	-iface LINE=IFACE      the same for one line, on its own interface: lines A
//	                       and B of a feed usually arrive on two NICs, often
//	                       with the same GROUP:PORT. Repeat it per line; a
//	                       plain -iface IFACE serves the lines not named
//
// With -tap, a line's datagrams are those its socket receives for its group
// and port (tickwire's RxGroup), from SRC when given; one socket serves each
// port. With -iface they are told apart by interface, then as in a
// capture: by group, port and SRC. Each interface is read by a goroutine
// of its own; the datagrams meet in one arbiter, in the order the readers
// hand them over (the kernel's receive stamps, one clock for every
// interface, measure how far behind a line was).
//
// Output, one object per line of stdout:
//
//	{"session":"<session>","seq":N,"line":"A","data":"<hex>"}
//	{"gap_from":N,"gap_to":M}
//
// session is the MoldUDP64 session with its trailing space padding removed;
// data is the message in lowercase hex, without its length prefix; a gap is
// inclusive at both ends. A session's first message is 1, so a loss at the
// start is a gap from 1; heartbeats and the end of session reveal messages
// lost at the end. At the end of the capture every open gap is declared.
// The arbitration rules are package arb's: the first copy wins, a copy that
// arrives after its gap was declared lost is counted as late.
//
// A summary goes to stderr: datagrams per line, messages delivered, gaps,
// and per line the messages it won, its duplicates and how far behind it
// was, its late and malformed datagrams, and the frames the capture held
// that were not the feed's. The exit status is 0 at the end of the capture
// (live: at the end), 1 when the capture cannot be read or the device not
// made, 2 for bad flags.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tickwire/tickwire/arb"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/udpcap"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// line is one -line flag.
type line struct {
	name   string
	stream udpcap.Stream
	iface  string // -iface: the interface it is captured on
}

type lineFlags []line

func (l *lineFlags) String() string { return fmt.Sprint(*l) }

// Set parses NAME=GROUP:PORT[@SRC].
func (l *lineFlags) Set(v string) error {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want NAME=GROUP:PORT[@SRC]")
	}
	addr, srcText, hasSrc := strings.Cut(rest, "@")
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("%q is not an IPv4 GROUP:PORT", addr)
	}
	s := udpcap.Stream{Group: ap.Addr(), Port: ap.Port()}
	if hasSrc {
		if s.Source, err = netip.ParseAddr(srcText); err != nil || !s.Source.Is4() {
			return fmt.Errorf("%q is not an IPv4 source address", srcText)
		}
	}
	for _, o := range *l {
		if o.name == name {
			return fmt.Errorf("line %s given twice", name)
		}
	}
	*l = append(*l, line{name: name, stream: s})
	return nil
}

// overlap returns an error when two lines take the same datagrams: the
// same GROUP:PORT, not told apart by source address or (-iface) by
// interface.
func overlap(lines []line) error {
	for i, a := range lines {
		for _, b := range lines[:i] {
			if a.stream.Group == b.stream.Group && a.stream.Port == b.stream.Port && a.iface == b.iface &&
				(!a.stream.Source.IsValid() || !b.stream.Source.IsValid() || a.stream.Source == b.stream.Source) {
				how := "by source, NAME=GROUP:PORT@SRC"
				if a.iface != "" {
					how += ", or by interface, -iface NAME=IFACE"
				}
				return fmt.Errorf("lines %s and %s are both %v:%d: tell them apart %s", b.name, a.name, a.stream.Group, a.stream.Port, how)
			}
		}
	}
	return nil
}

// ifaceFlags are the -iface flags: IFACE for every line without one of
// its own, or LINE=IFACE.
type ifaceFlags struct {
	all    string            // IFACE
	byLine map[string]string // LINE=IFACE
}

func (f *ifaceFlags) String() string { return fmt.Sprint(f.all, f.byLine) }

func (f *ifaceFlags) Set(v string) error {
	name, iface, perLine := strings.Cut(v, "=")
	switch {
	case !perLine && f.all != "":
		return errors.New("-iface IFACE given twice")
	case !perLine:
		f.all = v
	case name == "" || iface == "":
		return errors.New("want IFACE or LINE=IFACE")
	case f.byLine[name] != "":
		return fmt.Errorf("line %s given two interfaces", name)
	default:
		if f.byLine == nil {
			f.byLine = make(map[string]string)
		}
		f.byLine[name] = iface
	}
	return nil
}

func (f *ifaceFlags) set() bool { return f.all != "" || len(f.byLine) > 0 }

// assign gives each line its interface.
func (f *ifaceFlags) assign(lines []line) error {
	for name := range f.byLine {
		found := false
		for i := range lines {
			if lines[i].name == name {
				lines[i].iface, found = f.byLine[name], true
			}
		}
		if !found {
			return fmt.Errorf("-iface %s=%s: no line %s", name, f.byLine[name], name)
		}
	}
	for i := range lines {
		if lines[i].iface == "" {
			if f.all == "" {
				return fmt.Errorf("line %s has no interface: add -iface %s=IFACE or -iface IFACE", lines[i].name, lines[i].name)
			}
			lines[i].iface = f.all
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcastfeed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lines lineFlags
	path := fs.String("pcap", "", "capture `file` to read")
	fs.Var(&lines, "line", "a line, `NAME=GROUP:PORT[@SRC]`; repeat per line")
	timeout := fs.Duration("gap-timeout", arb.DefaultGapTimeout, "capture time a missing message is waited for")
	format := fs.String("format", "json", "output format (json)")
	var live liveOptions
	var iface ifaceFlags
	fs.Var(&iface, "iface", "live: capture from interface `IFACE` (or LINE=IFACE, per line; repeat) with AF_PACKET, joining the groups through the host (root)")
	fs.StringVar(&live.tap, "tap", "", "live: create TAP device `NAME` and run a tickwire stack on it (root)")
	fs.Func("addr", "live: the stack's address, `A/P` (default 10.207.0.2/24)", func(v string) (err error) {
		live.addr, err = netip.ParsePrefix(v)
		return err
	})
	fs.Func("host", "live: the kernel side's address, `H/P` (default 10.207.0.1/24; empty for none)", func(v string) (err error) {
		if v == "" {
			live.host = netip.Prefix{}
			return nil
		}
		live.host, err = netip.ParsePrefix(v)
		return err
	})
	fs.DurationVar(&live.duration, "duration", 0, "live: stop after this long (0: at the end of the session or on SIGINT/SIGTERM)")
	live.addr = netip.MustParsePrefix("10.207.0.2/24")
	live.host = netip.MustParsePrefix("10.207.0.1/24")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "mcastfeed: unexpected arguments %q\n", fs.Args())
		return 2
	case *path == "" && live.tap == "" && !iface.set():
		fmt.Fprintln(stderr, "mcastfeed: -pcap FILE, -tap NAME or -iface NAME is required")
		return 2
	case (*path != "") && (live.tap != "" || iface.set()) || live.tap != "" && iface.set():
		fmt.Fprintln(stderr, "mcastfeed: -pcap, -tap and -iface exclude each other")
		return 2
	case len(lines) == 0:
		fmt.Fprintln(stderr, "mcastfeed: at least one -line NAME=GROUP:PORT is required")
		return 2
	case len(lines) > arb.MaxLines:
		fmt.Fprintf(stderr, "mcastfeed: at most %d lines\n", arb.MaxLines)
		return 2
	case *format != "json":
		fmt.Fprintf(stderr, "mcastfeed: -format %q: only json is supported\n", *format)
		return 2
	case *timeout <= 0:
		fmt.Fprintln(stderr, "mcastfeed: -gap-timeout must be positive")
		return 2
	}
	if iface.set() {
		if err := iface.assign(lines); err != nil {
			fmt.Fprintln(stderr, "mcastfeed:", err)
			return 2
		}
	}
	if err := overlap(lines); err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}

	live.timeout = *timeout
	if live.tap != "" {
		return runLive(live, lines, stdout, stderr)
	}
	if iface.set() {
		return runIface(live, lines, stdout, stderr)
	}

	out := bufio.NewWriterSize(stdout, 64<<10)
	p := newPrinter(out, lines)
	a, err := arb.New(arb.Config{Lines: len(lines), GapTimeout: *timeout}, p)
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}
	p.arb = a
	streams := make([]udpcap.Stream, len(lines))
	for i, l := range lines {
		streams[i] = l.stream
	}
	dec, err := udpcap.New(udpcap.Config{Streams: streams})
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}
	src, err := pcap.Open(*path)
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 1
	}
	defer src.Close()

	start := time.Now()
	var last int64
	var firstErr [arb.MaxLines]error
	runErr := dec.Run(src, frame.NewBatch(64, pcap.DefaultSnapLen), func(dg *udpcap.Datagram) {
		if dg.Time > last {
			last = dg.Time
		}
		if err := a.Datagram(dg.Stream, dg.Payload, dg.Time); err != nil && firstErr[dg.Stream] == nil {
			firstErr[dg.Stream] = err
		}
	})
	a.End(last)
	if err := out.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	summary(stderr, a, dec, lines, firstErr[:len(lines)], time.Since(start))
	if runErr != nil {
		fmt.Fprintln(stderr, "mcastfeed:", runErr)
		return 1
	}
	if p.err != nil {
		fmt.Fprintln(stderr, "mcastfeed: writing output:", p.err)
		return 1
	}
	return 0
}

// printer writes the arbiter's output as JSON lines. It reuses one buffer
// and JSON-encodes the session only when it changes.
type printer struct {
	w           *bufio.Writer
	arb         *arb.Arbiter
	names       [][]byte // JSON string of each line's name
	session     [arb.MoldSessionLen]byte
	sessionJSON []byte
	buf         []byte
	err         error
}

func newPrinter(w *bufio.Writer, lines []line) *printer {
	p := &printer{w: w, buf: make([]byte, 0, 4096)}
	for _, l := range lines {
		b, _ := json.Marshal(l.name)
		p.names = append(p.names, b)
	}
	return p
}

// sessionText is the session as printed: the 10 bytes with their trailing
// spaces (MoldUDP64's padding) removed.
func sessionText(s [arb.MoldSessionLen]byte) string {
	return strings.TrimRight(string(s[:]), " ")
}

// Message implements arb.Handler.
func (p *printer) Message(m *arb.Message) {
	if s, _ := p.arb.Session(); p.sessionJSON == nil || s != p.session {
		p.session = s
		p.sessionJSON, _ = json.Marshal(sessionText(s))
	}
	b := append(p.buf[:0], `{"session":`...)
	b = append(b, p.sessionJSON...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, m.Seq, 10)
	b = append(b, `,"line":`...)
	b = append(b, p.names[m.Line]...)
	b = append(b, `,"data":"`...)
	b = hex.AppendEncode(b, m.Data)
	b = append(b, "\"}\n"...)
	p.write(b)
}

// Gap implements arb.Handler.
func (p *printer) Gap(g arb.Gap) {
	b := append(p.buf[:0], `{"gap_from":`...)
	b = strconv.AppendUint(b, g.From, 10)
	b = append(b, `,"gap_to":`...)
	b = strconv.AppendUint(b, g.To, 10)
	b = append(b, "}\n"...)
	p.write(b)
}

func (p *printer) write(b []byte) {
	p.buf = b
	if p.err == nil {
		_, p.err = p.w.Write(b)
	}
}

func summary(w io.Writer, a *arb.Arbiter, dec *udpcap.Decoder, lines []line, errs []error, wall time.Duration) {
	st := a.Stats()
	var ds udpcap.Stats
	if dec != nil {
		ds = dec.Stats()
	}
	s, _ := a.Session()
	fmt.Fprintf(w, "mcastfeed: session %q: %d messages delivered, %d gaps (%d messages lost), next seq %d; %d frames, %d feed datagrams in %v\n",
		sessionText(s), st.Delivered, st.Gaps, st.Lost, st.Next, ds.Frames, ds.Datagrams, wall.Round(time.Millisecond))
	for i, l := range lines {
		ls := a.LineStats(i)
		avg := time.Duration(0)
		if ls.Duplicates > 0 {
			avg = time.Duration(ls.BehindSum / int64(ls.Duplicates))
		}
		fmt.Fprintf(w, "  line %s %v: %d datagrams (%d heartbeats), %d messages, won %d, duplicates %d (behind by %v on average, %v at most), late %d, stale %d, malformed %d, other session %d\n",
			l.name, l.stream, ls.Datagrams, ls.Heartbeats, ls.Units, ls.Wins, ls.Duplicates, avg, time.Duration(ls.BehindMax),
			ls.Late, ls.Stale, ls.Malformed, ls.Sessions)
		if errs[i] != nil {
			fmt.Fprintf(w, "    first refused datagram: %v\n", errs[i])
		}
	}
	if dec == nil {
		return
	}
	fmt.Fprintf(w, "  frames skipped: %d of other UDP streams, %d not UDP, %d not IPv4, %d fragments, %d truncated, %d malformed, %d of other link types\n",
		ds.Unmatched, ds.NotUDP, ds.NotIPv4, ds.Fragments, ds.Truncated, ds.Malformed, ds.LinkType)
}
