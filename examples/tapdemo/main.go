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
// With -link dmaring the stack runs on link/dmaring descriptor rings
// (-queues N queue pairs, one RX goroutine each) instead of on the device,
// and an in-process software NIC (link/dmaring/nicsim) moves the frames
// between the rings and the TAP device; services, output and exit behaviour
// are the same, plus a dmaring counters line:
//
//	go run ./examples/tapdemo -link dmaring -queues 2 -tap tw0 -addr 10.201.0.2/24 -host 10.201.0.1/24
//
// Try it from another terminal:
//
//	ping -c 3 10.201.0.2
//	echo hello | nc -N 10.201.0.2 7
//	echo hello | nc -u -w 1 10.201.0.2 7
//
// It needs root (CAP_NET_ADMIN) to create the device.
//
// With -xdp IFACE it runs the same services, ready line, counters and exit
// on an existing interface over AF_XDP (link/afxdp) instead: no device is
// created, -tap, -host and -mtu are ignored, and on exit the XDP program is
// detached and the interface left as it was found. Only frames for -addr
// (and ARP for it) reach the stack; the host's own traffic on IFACE still
// reaches the kernel:
//
//	go run ./examples/tapdemo -xdp eth1 -addr 10.0.0.2/24
package main

import (
	"context"
	"flag"
	"io"

	"github.com/tickwire/tickwire/examples/internal/tapstack"
)

func main() {
	var opts tapstack.Options
	opts.RegisterFlags(flag.CommandLine, "tw0", "10.201.0.2/24", "10.201.0.1/24")
	flag.Parse()
	tapstack.Main("tapdemo", &opts, func(ctx context.Context, out io.Writer) error {
		return Run(ctx, opts, out)
	})
}
