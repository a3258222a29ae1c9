package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/examples/internal/tapstack"
)

// udpReceiveQueue is the depth of the server's UDP receive queue, in
// datagrams.
const udpReceiveQueue = 2048

// Options configure Run.
type Options struct {
	TAP    tapstack.Options // the device and the stack's addresses
	Port   int              // iperf3 port; 0 for DefaultPort
	Buffer int              // TCP buffers per connection; 0 for tickwire's default
}

// Run creates the device, runs the stack and serves iperf3 until ctx is
// done, then closes the stack (which removes the device), writes the
// counters to out and returns. It writes "ready" to out once it serves.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	// A UDP test is a bulk stream that a goroutine drains in bursts: 2048
	// datagrams (at most 3 MB, taken as the queue fills) ride out a reader
	// starved for a second at 20 Mb/s, where the default 128 last 70 ms.
	// An iperf3 test's streams (-P) and control connection all come from
	// the client's one address: the per-source limit is MaxConnections.
	n, err := tapstack.Open(opts.TAP, tickwire.Config{SendBuffer: opts.Buffer, ReceiveBuffer: opts.Buffer,
		UDPReceiveQueue: udpReceiveQueue, MaxConnectionsPerSource: tickwire.DefaultMaxConnections})
	if err != nil {
		return err
	}
	serveErr := serve(ctx, n, opts.Port, out)
	if err := n.Close(out); serveErr == nil {
		serveErr = err
	}
	return serveErr
}

func serve(ctx context.Context, n *tapstack.Node, port int, out io.Writer) error {
	ln, err := n.Stack.ListenTCP(uint16(port))
	if err != nil {
		return err
	}
	pc, err := n.Stack.ListenUDP(uint16(port))
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Fprintf(out, "iperf3d: %s, iperf3 port %d\n", n.Describe(), port)
	fmt.Fprintln(out, "ready")
	return NewServer(ln, pc, out).Serve(ctx)
}
