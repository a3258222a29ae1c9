// Command rdmademo runs a RoCEv2 responder (package rdma) on a tickwire stack
// on a TAP device, for a peer on the kernel side of the device:
//
//	go run ./examples/rdmademo -tap NAME -addr A/P -host H/P -mr-size N -peer-qpn Q -peer-psn P [-path-mtu M] [-recv K]
//
// It creates the TAP device (the kernel side at -host), runs the stack at
// -addr, registers one memory region of N bytes (zeroed; remote read and
// write allowed) and moves one queue pair to RTS with the peer's QPN Q, the
// PSN P it expects first from the peer, and path MTU M (256, 512 or 1024,
// default 1024; 2048 and 4096 need an IP MTU, -mtu, above the TAP's 1500).
// It prints one JSON line of integers
//
//	{"qpn": 17, "psn": 1234, "rkey": 4096, "addr": 268435456, "len": N, "mtu": M}
//
// (psn: its own first send PSN, random unless -psn sets it; addr below 2^53),
// then "ready", and answers the peer as the InfiniBand specification's
// responder: RDMA WRITE and READ with ACKs and READ responses, sequence
// errors and remote access violations with NAKs, duplicates acknowledged
// again, packets with a bad ICRC dropped; a SEND lands in one of K receive
// buffers of M bytes (outside the region) that -recv K posts, and draws an
// RNR NAK when none is left. The peer sends to UDP port 4791.
//
// On SIGTERM or SIGINT it prints "sha256 <lowercase hex>" of the region's
// bytes on a line, then its counters ("rdma:" and the stack's "stats:"),
// removes the device and exits 0.
//
// -peer sets the peer's address (default: the -host address).
//
// With -requester it drives another rdmademo instead: its queue pair (QPN
// 17, the first of its device; first PSN -psn) connects to the responder at
// -peer with -peer-qpn and -peer-psn (the numbers of the responder's JSON
// line), WRITEs a pattern over the responder's region (-rkey, -raddr,
// -rlen), READs it back and compares, prints "sha256 <hex>" of what it wrote
// (the responder's line on exit must match), its counters, and exits. The
// stack routes to -peer through the kernel side (-host) of its own device:
//
//	go run ./examples/rdmademo -tap rd0 -addr 10.211.0.2/24 -host 10.211.0.1/24 -mr-size 65536 -peer-qpn 17 -peer-psn 100
//	go run ./examples/rdmademo -requester -tap rd1 -addr 10.212.0.2/24 -host 10.212.0.1/24 -psn 100 \
//	    -peer 10.211.0.2 -peer-qpn Q -peer-psn P -rkey K -raddr A -rlen 65536
//
// (with IP forwarding on in the kernel). It needs root (CAP_NET_ADMIN) to
// create the device.
package main

import (
	"context"
	"flag"
	"io"

	"github.com/tickwire/tickwire/examples/internal/tapstack"
)

func main() {
	var opts Options
	opts.Node.RegisterFlags(flag.CommandLine, "rd0", "10.211.0.2/24", "10.211.0.1/24")
	opts.RegisterFlags(flag.CommandLine)
	flag.Parse()
	tapstack.Main("rdmademo", &opts.Node, func(ctx context.Context, out io.Writer) error {
		return Run(ctx, opts, out)
	})
}
