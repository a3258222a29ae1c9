package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tickwire/tickwire/arb"
	"github.com/tickwire/tickwire/link/afpacket"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/udpcap"
)

// runIface captures the lines from a network interface with AF_PACKET
// (root), after joining their groups through kernel sockets so that the
// host sends the IGMP reports, and arbitrates in capture time (the
// kernel's receive stamps), advancing on a quiet link by the wall clock.
// It ends like live mode.
func runIface(iface string, o liveOptions, lines []line, stdout, stderr io.Writer) int {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 1
	}
	// The kernel sockets only hold the memberships; their datagrams are
	// never read (the kernel drops them when their buffers are full).
	for _, l := range lines {
		c, err := net.ListenMulticastUDP("udp4", ifi, &net.UDPAddr{IP: l.stream.Group.AsSlice(), Port: int(l.stream.Port)})
		if err != nil {
			fmt.Fprintln(stderr, "mcastfeed: join:", err)
			return 1
		}
		defer c.Close()
	}
	tick := max(o.timeout/4, time.Millisecond)
	src, err := afpacket.New(iface, afpacket.Config{ReadTimeout: tick})
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 1
	}
	defer src.Close()
	streams := make([]udpcap.Stream, len(lines))
	for i, l := range lines {
		streams[i] = l.stream
	}
	dec, err := udpcap.New(udpcap.Config{Streams: streams})
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	p := newPrinter(out, lines)
	a, err := arb.New(arb.Config{Lines: len(lines), GapTimeout: o.timeout}, p)
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}
	p.arb = a
	fmt.Fprintf(stderr, "mcastfeed: capturing on %s, %d lines joined; ready\n", iface, len(lines))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	go func() { <-ctx.Done(); src.Close() }() // unblocks ReadFrames with io.EOF
	start := time.Now()
	refused := make([]error, len(lines))
	batch := frame.NewBatch(64, afpacket.DefaultFrameSize)
	var readErr error
	for !a.Ended() {
		n, err := src.ReadFrames(batch)
		for i := range batch[:n] {
			f := &batch[i]
			if dg, ok := dec.Decode(f.LinkType, f.Data(), f.Time); ok {
				if err := a.Datagram(dg.Stream, dg.Payload, dg.Time); err != nil && refused[dg.Stream] == nil {
					refused[dg.Stream] = err
				}
			}
		}
		if errors.Is(err, afpacket.ErrTimeout) {
			a.Tick(time.Now().UnixNano())
			out.Flush()
			continue
		}
		if err == io.EOF || ctx.Err() != nil {
			break
		}
		if err != nil {
			readErr = err
			break
		}
	}
	a.End(time.Now().UnixNano())
	if err := out.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	summary(stderr, a, dec, lines, refused, time.Since(start))
	if readErr != nil {
		fmt.Fprintln(stderr, "mcastfeed:", readErr)
		return 1
	}
	if p.err != nil {
		fmt.Fprintln(stderr, "mcastfeed: writing output:", p.err)
		return 1
	}
	return 0
}
