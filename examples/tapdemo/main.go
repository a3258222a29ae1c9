// Command tapdemo runs a tickwire stack on a TAP device so that the Linux
// kernel, and anything routed through it, can talk to it:
//
//	go run ./examples/tapdemo -tap tw0 -addr 10.201.0.2/24 -host 10.201.0.1/24
//
// It creates the TAP device, gives its kernel side the -host address, runs
// the stack at -addr, and serves ICMP echo (ping), TCP echo on port 7, UDP
// echo on port 7 and TCP discard on port 9. It prints "ready" on stdout once
// it serves. On SIGINT or SIGTERM it prints the stack's counters, removes the
// device and exits 0. With -pcap FILE it records every frame to FILE.
//
// Try it from another terminal:
//
//	ping -c 3 10.201.0.2
//	echo hello | nc -N 10.201.0.2 7
//	echo hello | nc -u -w 1 10.201.0.2 7
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
	flag.StringVar(&opts.Device, "tap", "tw0", "TAP device to create or open")
	flag.StringVar(&addr, "addr", "10.201.0.2/24", "the stack's IPv4 address and prefix")
	flag.StringVar(&host, "host", "10.201.0.1/24", "address for the kernel side of the device (empty: none)")
	flag.IntVar(&opts.MTU, "mtu", 1500, "IP MTU of the device and the stack (below 1448 the MSS shrinks to MTU-40)")
	flag.StringVar(&opts.PcapFile, "pcap", "", "record every frame to this pcap file")
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
	fmt.Fprintf(os.Stderr, "tapdemo: "+format+"\n", args...)
	os.Exit(1)
}
