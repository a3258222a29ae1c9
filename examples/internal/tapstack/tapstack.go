// Package tapstack is the part that the TAP example programs (tapdemo,
// iperf3d) share: their device flags, the root check, a tickwire stack on a
// new TAP device with an optional pcap recorder, and the counters they print
// on exit.
package tapstack

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/tap"
)

// Options describe the device and the stack on it.
type Options struct {
	Device   string       // TAP device name
	Addr     netip.Prefix // the stack's address
	Host     netip.Prefix // the kernel side's address; zero for none
	MTU      int          // IP MTU; 0 for the default
	PcapFile string       // record frames here when not empty
}

// RegisterFlags binds -tap, -addr, -host, -mtu and -pcap to o, with the
// given defaults for the first three (host may be empty).
func (o *Options) RegisterFlags(fs *flag.FlagSet, device, addr, host string) {
	fs.StringVar(&o.Device, "tap", device, "TAP device to create or open")
	// netip.Prefix parses itself, and an empty -host leaves it zero.
	fs.TextVar(&o.Addr, "addr", netip.MustParsePrefix(addr), "the stack's IPv4 address and prefix")
	var hostDefault netip.Prefix
	if host != "" {
		hostDefault = netip.MustParsePrefix(host)
	}
	fs.TextVar(&o.Host, "host", hostDefault, "address for the kernel side of the device (empty: none)")
	fs.IntVar(&o.MTU, "mtu", tap.DefaultMTU, "IP MTU of the device and the stack (below 1448 the MSS shrinks to MTU-40)")
	fs.StringVar(&o.PcapFile, "pcap", "", "record every frame to this pcap file")
}

// Main finishes a program's main function once its flags are parsed: it
// exits with a message when not root, then calls run with a context that
// SIGINT and SIGTERM cancel and with stdout, and exits 1 with the error run
// returns, prefixed by the program's name. It returns when run succeeds.
func Main(program string, opts *Options, run func(ctx context.Context, out io.Writer) error) {
	if os.Geteuid() != 0 {
		fatalf(program, "needs root (CAP_NET_ADMIN) to create TAP device %s; run it with sudo", opts.Device)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		stop()
		fatalf(program, "%v", err)
	}
}

func fatalf(program, format string, args ...any) {
	fmt.Fprintf(os.Stderr, program+": "+format+"\n", args...)
	os.Exit(1)
}

// Node is a tickwire stack on a TAP device, optionally recorded.
type Node struct {
	Stack *tickwire.Stack
	TAP   *tap.Endpoint
	rec   *recorder.Endpoint
	opts  Options
}

// Open creates (or opens) the device described by opts and runs a stack on
// it, configured by cfg with its Link, MAC, Addr and MTU set from opts (and
// its MSS lowered when a full segment would not fit the MTU). The caller
// must call Close.
func Open(opts Options, cfg tickwire.Config) (*Node, error) {
	ep, err := tap.New(tap.Config{Name: opts.Device, MTU: opts.MTU, Host: opts.Host})
	if err != nil {
		return nil, err
	}
	n := &Node{TAP: ep, opts: opts}
	var link stack.LinkEndpoint = ep
	if opts.PcapFile != "" {
		if n.rec, err = recorder.Create(ep, opts.PcapFile); err != nil {
			ep.Close()
			return nil, err
		}
		link = n.rec
	}
	cfg.Link, cfg.MAC, cfg.Addr, cfg.MTU = link, ep.MAC(), opts.Addr, opts.MTU
	if opts.MTU > 0 && opts.MTU-40 < tickwire.DefaultMSS {
		cfg.MSS = opts.MTU - 40
	}
	if n.Stack, err = tickwire.New(cfg); err != nil {
		link.Close()
		return nil, err
	}
	return n, nil
}

// Describe is the line a program prints before "ready": where the stack is.
func (n *Node) Describe() string {
	return fmt.Sprintf("stack %s (MAC %s) on %s, kernel side %v", n.opts.Addr, n.TAP.MAC(), n.TAP.Name(), n.opts.Host)
}

// Close closes the stack, which closes the recorder and the device (a
// device Open created goes away), then writes the exit report to out: the
// stack's non-zero counters after a "stats:" line, the device's counters
// and, when recording, the recorder's. It returns the recorder's error, if
// any.
func (n *Node) Close(out io.Writer) error {
	st := n.Stack.Stats()
	n.Stack.Close()
	fmt.Fprintln(out, "stats:")
	st.WriteTo(out)
	ts := n.TAP.Stats()
	fmt.Fprintf(out, "tap %s: %d frames in (%d for other hosts, %d too long dropped), %d out (%d dropped)\n",
		n.TAP.Name(), ts.RxFrames, ts.RxOtherHost, ts.RxTooLong, ts.TxFrames, ts.TxDropped)
	if n.rec == nil {
		return nil
	}
	rs := n.rec.Stats()
	fmt.Fprintf(out, "pcap: %d frames sent, %d received, recorded to %s\n", rs.Sent, rs.Received, n.opts.PcapFile)
	return n.rec.Err()
}
