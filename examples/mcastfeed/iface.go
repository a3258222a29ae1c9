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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tickwire/tickwire/arb"
	"github.com/tickwire/tickwire/link/afpacket"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/udpcap"
)

// runIface captures the lines from their network interfaces with
// AF_PACKET (root), after joining their groups through kernel sockets on
// those interfaces so that the host sends the IGMP reports, and arbitrates
// in capture time (the kernel's receive stamps), advancing on a quiet link
// by the wall clock. Each interface has its reader goroutine; they share
// the arbiter under a mutex. It ends like live mode.
func runIface(o liveOptions, lines []line, stdout, stderr io.Writer) int {
	var caps []*ifaceCapture
	byName := map[string]*ifaceCapture{}
	for i, l := range lines {
		c := byName[l.iface]
		if c == nil {
			ifi, err := net.InterfaceByName(l.iface)
			if err != nil {
				fmt.Fprintln(stderr, "mcastfeed:", err)
				return 1
			}
			c = &ifaceCapture{ifi: ifi}
			byName[l.iface] = c
			caps = append(caps, c)
		}
		c.lines = append(c.lines, i)
		c.streams = append(c.streams, l.stream)
		// The kernel sockets only hold the memberships; their datagrams
		// are never read (the kernel drops them when their buffers are
		// full).
		k, err := net.ListenMulticastUDP("udp4", c.ifi, &net.UDPAddr{IP: l.stream.Group.AsSlice(), Port: int(l.stream.Port)})
		if err != nil {
			fmt.Fprintf(stderr, "mcastfeed: join %v on %s: %v\n", l.stream.Group, l.iface, err)
			return 1
		}
		defer k.Close()
	}
	tick := max(o.timeout/4, time.Millisecond)
	for _, c := range caps {
		var err error
		if c.dec, err = udpcap.New(udpcap.Config{Streams: c.streams}); err != nil {
			fmt.Fprintln(stderr, "mcastfeed:", err)
			return 2
		}
		if c.src, err = afpacket.New(c.ifi.Name, afpacket.Config{ReadTimeout: tick}); err != nil {
			fmt.Fprintln(stderr, "mcastfeed:", err)
			return 1
		}
		defer c.src.Close()
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	p := newPrinter(out, lines)
	a, err := arb.New(arb.Config{Lines: len(lines), GapTimeout: o.timeout}, p)
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}
	p.arb = a
	names := make([]string, len(caps))
	for i, c := range caps {
		names[i] = c.ifi.Name
	}
	fmt.Fprintf(stderr, "mcastfeed: capturing on %s, %d lines joined; ready\n", strings.Join(names, ", "), len(lines))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // unblocks ReadFrames with io.EOF
		<-ctx.Done()
		for _, c := range caps {
			c.src.Close()
		}
	}()
	start := time.Now()
	m := &ifaceMerge{a: a, out: out, refused: make([]error, len(lines))}
	var wg sync.WaitGroup
	errs := make([]error, len(caps))
	for i, c := range caps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel() // one reader's end is everyone's
			errs[i] = m.read(ctx, c)
		}()
	}
	wg.Wait()
	a.End(time.Now().UnixNano())
	if err := out.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	summary(stderr, a, nil, lines, m.refused, time.Since(start))
	code := 0
	for i, c := range caps {
		ds := c.dec.Stats()
		fmt.Fprintf(stderr, "  %s: %d frames, %d feed datagrams; skipped %d of other UDP streams, %d not UDP, %d not IPv4, %d fragments, %d truncated, %d malformed\n",
			c.ifi.Name, ds.Frames, ds.Datagrams, ds.Unmatched, ds.NotUDP, ds.NotIPv4, ds.Fragments, ds.Truncated, ds.Malformed)
		if errs[i] != nil {
			fmt.Fprintf(stderr, "mcastfeed: %s: %v\n", c.ifi.Name, errs[i])
			code = 1
		}
	}
	if p.err != nil {
		fmt.Fprintln(stderr, "mcastfeed: writing output:", p.err)
		return 1
	}
	return code
}

// ifaceCapture is one interface's capture: the lines captured on it
// (indexes into the -line list) and their streams, in the decoder's order.
type ifaceCapture struct {
	ifi     *net.Interface
	lines   []int
	streams []udpcap.Stream
	dec     *udpcap.Decoder
	src     *afpacket.Source
}

// ifaceMerge is the arbiter the readers share.
type ifaceMerge struct {
	mu      sync.Mutex
	a       *arb.Arbiter
	out     *bufio.Writer
	refused []error // the first refused datagram of each line
}

// read hands c's datagrams to the arbiter until the session has ended, ctx
// is done or the capture fails.
func (m *ifaceMerge) read(ctx context.Context, c *ifaceCapture) error {
	batch := frame.NewBatch(64, afpacket.DefaultFrameSize)
	for {
		n, err := c.src.ReadFrames(batch)
		m.mu.Lock()
		for i := range batch[:n] {
			f := &batch[i]
			if dg, ok := c.dec.Decode(f.LinkType, f.Data(), f.Time); ok {
				line := c.lines[dg.Stream]
				if err := m.a.Datagram(line, dg.Payload, dg.Time); err != nil && m.refused[line] == nil {
					m.refused[line] = err
				}
			}
		}
		if errors.Is(err, afpacket.ErrTimeout) {
			m.a.Tick(time.Now().UnixNano())
			m.out.Flush()
		}
		ended := m.a.Ended()
		m.mu.Unlock()
		switch {
		case ended, err == io.EOF, ctx.Err() != nil:
			return nil
		case err != nil && !errors.Is(err, afpacket.ErrTimeout):
			return err
		}
	}
}
