package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/arb"
	"github.com/tickwire/tickwire/examples/internal/tapstack"
)

// liveOptions are the flags of live mode.
type liveOptions struct {
	tap        string
	addr, host netip.Prefix
	timeout    time.Duration
	duration   time.Duration // 0: until a signal or the end of the session
}

// runLive joins every line's group on a tickwire stack on a new TAP device
// and arbitrates what arrives, in wall time (the frames' receive times),
// until SIGINT or SIGTERM, the -duration, or the end of the MoldUDP64
// session with nothing left to wait for.
func runLive(o liveOptions, lines []line, stdout, stderr io.Writer) int {
	node, err := tapstack.Open(tapstack.Options{Device: o.tap, Addr: o.addr, Host: o.host}, tickwire.Config{})
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 1
	}
	defer node.Close(io.Discard)

	out := bufio.NewWriterSize(stdout, 64<<10)
	p := newPrinter(out, lines)
	a, err := arb.New(arb.Config{Lines: len(lines), GapTimeout: o.timeout}, p)
	if err != nil {
		fmt.Fprintln(stderr, "mcastfeed:", err)
		return 2
	}
	p.arb = a
	var (
		mu       sync.Mutex // serialises the arbiter and the output
		refused  = make([]error, len(lines))
		unknown  uint64 // datagrams that match no line
		finished = make(chan struct{})
		once     sync.Once
		deliver  func(c *tickwire.UDPConn, port uint16, payload []byte, from netip.AddrPort)
	)
	handler := func(port uint16) tickwire.UDPHandler {
		return func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
			deliver(c, port, payload, from)
		}
	}
	deliver = func(c *tickwire.UDPConn, port uint16, payload []byte, from netip.AddrPort) {
		idx := lineOf(lines, c.RxGroup(), port, from.Addr())
		mu.Lock()
		defer mu.Unlock()
		if idx < 0 {
			unknown++
			return
		}
		if err := a.Datagram(idx, payload, c.RxTime().UnixNano()); err != nil && refused[idx] == nil {
			refused[idx] = err
		}
		if a.Ended() {
			once.Do(func() { close(finished) })
		}
	}
	// One socket per port, joined to every group of the port's lines.
	socks := map[uint16]*tickwire.UDPConn{}
	for _, l := range lines {
		c := socks[l.stream.Port]
		if c == nil {
			if c, err = node.Stack.ServeUDP(l.stream.Port, handler(l.stream.Port)); err != nil {
				fmt.Fprintln(stderr, "mcastfeed:", err)
				return 1
			}
			defer c.Close()
			socks[l.stream.Port] = c
		}
		if err := c.JoinGroup(l.stream.Group); err != nil && !isAlreadyJoined(err) {
			fmt.Fprintln(stderr, "mcastfeed:", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "mcastfeed: %s, %d lines joined; ready\n", node.Describe(), len(lines))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	start := time.Now()
	tick := time.NewTicker(max(o.timeout/4, time.Millisecond))
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-finished:
			break loop
		case now := <-tick.C:
			mu.Lock()
			a.Tick(now.UnixNano())
			out.Flush()
			ended := a.Ended()
			mu.Unlock()
			if ended {
				break loop
			}
		}
	}
	for _, c := range socks {
		c.Close() // no handler call after this
	}
	mu.Lock()
	defer mu.Unlock()
	a.End(time.Now().UnixNano())
	if err := out.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	summary(stderr, a, nil, lines, refused, time.Since(start))
	if unknown > 0 {
		fmt.Fprintf(stderr, "  %d datagrams matched no line\n", unknown)
	}
	if p.err != nil {
		fmt.Fprintln(stderr, "mcastfeed: writing output:", p.err)
		return 1
	}
	return 0
}

// lineOf returns the index of the line a datagram sent to group:port from
// src belongs to, or -1.
func lineOf(lines []line, group netip.Addr, port uint16, src netip.Addr) int {
	for i := range lines {
		s := &lines[i].stream
		if s.Group == group && s.Port == port && (!s.Source.IsValid() || s.Source == src) {
			return i
		}
	}
	return -1
}

// isAlreadyJoined reports a second join of a group by the same socket: two
// lines on one GROUP:PORT told apart by source.
func isAlreadyJoined(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE)
}
