// Command iperf3d is an iperf3-compatible server running on a tickwire
// stack over a TAP device, so that the stock iperf3 client measures
// tickwire:
//
//	go run ./examples/iperf3d -tap tw1 -addr 10.202.0.2/24 -host 10.202.0.1/24
//	iperf3 -c 10.202.0.2            # TCP, client to server
//	iperf3 -c 10.202.0.2 -R -P 4    # 4 streams, server to client
//	iperf3 -c 10.202.0.2 -u -b 100M # UDP
//
// It creates the TAP device (the flags are examples/tapdemo's), gives its
// kernel side the -host address, runs the stack at -addr and serves iperf3's
// control protocol on TCP and UDP port 5201: the parameter exchange, TCP and
// UDP streams, -R (the server sends), -P (parallel streams), -n/-k/-t ends
// and the results exchange. Bidirectional tests (--bidir) are refused with
// iperf3's "not implemented" error. Tests run one at a time; a client
// arriving meanwhile is told the server is busy. It prints "ready" once it
// serves, a line per test, and the stack's counters on SIGINT or SIGTERM,
// when it removes the device and exits 0.
//
// It needs root (CAP_NET_ADMIN) to create the device.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var opts Options
	var addr, host string
	flag.StringVar(&opts.Device, "tap", "tw1", "TAP device to create or open")
	flag.StringVar(&addr, "addr", "10.202.0.2/24", "the stack's IPv4 address and prefix")
	flag.StringVar(&host, "host", "10.202.0.1/24", "address for the kernel side of the device (empty: none)")
	flag.IntVar(&opts.MTU, "mtu", 1500, "IP MTU of the device and the stack")
	flag.StringVar(&opts.PcapFile, "pcap", "", "record every frame to this pcap file")
	flag.IntVar(&opts.Port, "port", DefaultPort, "TCP and UDP port to serve")
	flag.IntVar(&opts.Buffer, "buffer", 0, "TCP send and receive buffer per connection in bytes (0: tickwire's default, 32 KiB)")
	flag.Parse()

	var err error
	if opts.Addr, err = netip.ParsePrefix(addr); err != nil {
		fatalf("-addr: %v", err)
	}
	if host != "" {
		if opts.Host, err = netip.ParsePrefix(host); err != nil {
			fatalf("-host: %v", err)
		}
	}
	if os.Geteuid() != 0 {
		fatalf("needs root (CAP_NET_ADMIN) to create TAP device %s; run it with sudo", opts.Device)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, opts, os.Stdout); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "iperf3d: "+format+"\n", args...)
	os.Exit(1)
}
