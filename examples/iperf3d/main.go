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
	"io"

	"github.com/tickwire/tickwire/examples/internal/tapstack"
)

func main() {
	var opts Options
	opts.TAP.RegisterFlags(flag.CommandLine, "tw1", "10.202.0.2/24", "10.202.0.1/24")
	flag.IntVar(&opts.Port, "port", DefaultPort, "TCP and UDP port to serve")
	flag.IntVar(&opts.Buffer, "buffer", 0, "TCP send and receive buffer per connection in bytes (0: tickwire's default, 32 KiB)")
	flag.Parse()
	tapstack.Main("iperf3d", &opts.TAP, func(ctx context.Context, out io.Writer) error {
		return Run(ctx, opts, out)
	})
}
