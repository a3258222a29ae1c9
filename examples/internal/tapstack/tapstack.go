// Package tapstack is the part that the TAP example programs (tapdemo,
// iperf3d) share: their device flags, the root check, a tickwire stack on a
// new TAP device with an optional pcap recorder, and the counters they print
// on exit. With -link dmaring the stack runs on link/dmaring queues instead,
// and an in-process software NIC (link/dmaring/nicsim) moves the frames
// between the rings and the TAP device; with -xdp it runs on an existing
// interface over AF_XDP (link/afxdp).
package tapstack

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/afxdp"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
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
	Link     string       // "tap" (the stack on the device) or "dmaring" (on rings a software NIC serves)
	Queues   int          // dmaring queue pairs
	// XDP, when not empty, is an existing interface to run the stack on
	// over AF_XDP (link/afxdp) instead of a TAP device: Device, Host,
	// MTU and Link are then ignored (the interface's MTU is used), and the
	// interface is left as it was found on Close.
	XDP string
}

// Links are the values of -link.
const (
	LinkTAP     = "tap"
	LinkDMARing = "dmaring"
)

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
	fs.StringVar(&o.Link, "link", LinkTAP, "the stack's link: tap (the device itself) or dmaring (DMA rings served by a software NIC on the device)")
	fs.IntVar(&o.Queues, "queues", 1, "queue pairs of the dmaring link")
	fs.StringVar(&o.XDP, "xdp", "", "run on this existing interface over AF_XDP instead of a TAP device (-tap, -host, -mtu and -link ignored)")
}

// Main finishes a program's main function once its flags are parsed: it
// exits with a message when not root, then calls run with a context that
// SIGINT and SIGTERM cancel and with stdout, and exits 1 with the error run
// returns, prefixed by the program's name. It returns when run succeeds.
func Main(program string, opts *Options, run func(ctx context.Context, out io.Writer) error) {
	if os.Geteuid() != 0 {
		if opts.XDP != "" {
			fatalf(program, "needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF) for AF_XDP on %s; run it with sudo", opts.XDP)
		}
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
	TAP   *tap.Endpoint     // nil with -xdp
	Ring  *dmaring.Endpoint // with -link dmaring, else nil
	XDP   *afxdp.Endpoint   // with -xdp, else nil
	dev   *nicsim.Device
	rec   *recorder.Endpoint
	opts  Options
}

// Open creates (or opens) the device described by opts and runs a stack on
// it, configured by cfg with its Link, MAC, Addr and MTU set from opts (and
// its MSS lowered when a full segment would not fit the MTU). The caller
// must call Close.
func Open(opts Options, cfg tickwire.Config) (*Node, error) {
	var n *Node
	var link stack.LinkEndpoint
	var mac net.HardwareAddr
	var err error
	switch {
	case opts.XDP != "":
		ep, err := afxdp.New(opts.XDP, afxdp.Config{Addr: opts.Addr.Addr()})
		if err != nil {
			return nil, err
		}
		opts.MTU = int(ep.MTU())
		n = &Node{XDP: ep, opts: opts}
		link, mac = ep, ep.MAC()
	case opts.Link == "" || opts.Link == LinkTAP:
		ep, err := tap.New(tap.Config{Name: opts.Device, MTU: opts.MTU, Host: opts.Host})
		if err != nil {
			return nil, err
		}
		n = &Node{TAP: ep, opts: opts}
		link, mac = ep, ep.MAC()
	case opts.Link == LinkDMARing:
		if n, err = openRing(opts); err != nil {
			return nil, err
		}
		link, mac = n.Ring, n.Ring.MAC()
	default:
		return nil, fmt.Errorf("-link %q: want %s or %s", opts.Link, LinkTAP, LinkDMARing)
	}
	if opts.PcapFile != "" {
		if n.rec, err = recorder.Create(link, opts.PcapFile); err != nil {
			link.Close()
			n.closeDevice()
			return nil, err
		}
		link = n.rec
	}
	cfg.Link, cfg.MAC, cfg.Addr, cfg.MTU = link, mac, opts.Addr, opts.MTU
	if opts.MTU > 0 && opts.MTU-40 < tickwire.DefaultMSS {
		cfg.MSS = opts.MTU - 40
	}
	if n.Stack, err = tickwire.New(cfg); err != nil {
		link.Close()
		n.closeDevice()
		return nil, err
	}
	return n, nil
}

// openRing makes the dmaring endpoint, the TAP device the software NIC
// puts its wire on (with the endpoint's MAC, so the kernel addresses the
// stack), and the NIC.
func openRing(opts Options) (*Node, error) {
	if opts.Queues < 1 || opts.Queues > dmaring.MaxQueues {
		return nil, fmt.Errorf("-queues %d: want 1 to %d", opts.Queues, dmaring.MaxQueues)
	}
	mtu := opts.MTU
	if mtu == 0 {
		mtu = tap.DefaultMTU
	}
	ep, err := dmaring.New(dmaring.Config{Queues: opts.Queues, MTU: uint32(mtu), BufSize: max(dmaring.DefaultBufSize, (mtu+14+4+63)&^63)})
	if err != nil {
		return nil, err
	}
	w, err := nicsim.NewTapWire(tap.Config{Name: opts.Device, MTU: mtu, Host: opts.Host, MAC: ep.MAC()})
	if err != nil {
		ep.Close()
		return nil, err
	}
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: w})
	if err != nil {
		w.Close()
		ep.Close()
		return nil, err
	}
	return &Node{TAP: w.Endpoint(), Ring: ep, dev: dev, opts: opts}, nil
}

// closeDevice stops the software NIC, which closes its TAP device.
func (n *Node) closeDevice() {
	if n.dev != nil {
		n.dev.Close()
	}
}

// Describe is the line a program prints before "ready": where the stack is.
func (n *Node) Describe() string {
	if n.XDP != nil {
		copyMode := "copy"
		if n.XDP.ZeroCopy() {
			copyMode = "zero-copy"
		}
		return fmt.Sprintf("stack %s (MAC %s) on %s over AF_XDP (%s mode, %s)", n.opts.Addr, n.XDP.MAC(), n.opts.XDP, n.XDP.AttachMode(), copyMode)
	}
	if n.Ring != nil {
		return fmt.Sprintf("stack %s (MAC %s) on %d dmaring queue pairs, software NIC on %s, kernel side %v",
			n.opts.Addr, n.Ring.MAC(), n.Ring.Queues(), n.TAP.Name(), n.opts.Host)
	}
	return fmt.Sprintf("stack %s (MAC %s) on %s, kernel side %v", n.opts.Addr, n.TAP.MAC(), n.TAP.Name(), n.opts.Host)
}

// Close closes the stack, which closes the recorder and the device (a
// device Open created goes away), then writes the exit report to out: the
// stack's non-zero counters after a "stats:" line, the device's counters
// and, when recording, the recorder's. It returns the recorder's error, if
// any.
func (n *Node) Close(out io.Writer) error {
	st := n.Stack.Stats()
	var ringStats dmaring.Stats
	if n.Ring != nil {
		ringStats = n.Ring.Stats()
	}
	n.Stack.Close()
	n.closeDevice()
	fmt.Fprintln(out, "stats:")
	st.WriteTo(out)
	if n.Ring != nil {
		ds := n.dev.Stats()
		fmt.Fprintf(out, "dmaring: %d frames in, %d out (%d dropped: ring full); NIC: %d errors, %d frames dropped without a descriptor\n",
			ringStats.RxFrames, ringStats.TxFrames, ringStats.TxRingFull, ds.Errors, ds.RxNoDescriptor)
	}
	if n.XDP != nil {
		xs := n.XDP.Stats()
		fmt.Fprintf(out, "xdp %s: %d frames in (%d invalid, %d dropped by the kernel), %d out (%d dropped)\n",
			n.opts.XDP, xs.RxFrames, xs.RxInvalid, xs.KernelDrops, xs.TxFrames, xs.TxDropped)
	} else {
		ts := n.TAP.Stats()
		fmt.Fprintf(out, "tap %s: %d frames in (%d for other hosts, %d too long dropped), %d out (%d dropped)\n",
			n.TAP.Name(), ts.RxFrames, ts.RxOtherHost, ts.RxTooLong, ts.TxFrames, ts.TxDropped)
	}
	if n.rec == nil {
		return nil
	}
	rs := n.rec.Stats()
	fmt.Fprintf(out, "pcap: %d frames sent, %d received, recorded to %s\n", rs.Sent, rs.Received, n.opts.PcapFile)
	return n.rec.Err()
}
