package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/examples/internal/tapstack"
)

// Ports served.
const (
	EchoPort    = 7
	DiscardPort = 9
)

// Run creates the device, runs the stack and serves until ctx is done, then
// closes the stack (which removes the device), writes the counters to out
// and returns. It writes "ready" to out once it serves.
func Run(ctx context.Context, opts tapstack.Options, out io.Writer) error {
	n, err := tapstack.Open(opts, tickwire.Config{})
	if err != nil {
		return err
	}
	serveErr := Serve(ctx, n.Stack, func() {
		fmt.Fprintf(out, "tapdemo: %s\n", n.Describe())
		fmt.Fprintln(out, "ready")
	})
	if err := n.Close(out); serveErr == nil {
		serveErr = err
	}
	return serveErr
}

// Serve runs the demo services on s until ctx is done: TCP echo and UDP
// echo on EchoPort, TCP discard on DiscardPort (ICMP echo is answered by the
// stack itself). It calls ready once all of them listen, and returns after
// closing them and every connection, with all its goroutines joined.
func Serve(ctx context.Context, s *tickwire.Stack, ready func()) error {
	echo, err := s.ListenTCP(EchoPort)
	if err != nil {
		return err
	}
	discard, err := s.ListenTCP(DiscardPort)
	if err != nil {
		echo.Close()
		return err
	}
	udp, err := s.ListenUDP(EchoPort)
	if err != nil {
		echo.Close()
		discard.Close()
		return err
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	acceptLoop := func(ln net.Listener, handle func(net.Conn)) {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed; refused connections do not reach Accept
			}
			track(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer track(c, false)
				defer c.Close()
				handle(c)
			}()
		}
	}
	wg.Add(3)
	go acceptLoop(echo, func(c net.Conn) { io.Copy(c, c) })
	go acceptLoop(discard, func(c net.Conn) { io.Copy(io.Discard, c) })
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
					return
				}
				continue // a datagram too large for buf, or an ICMP error
			}
			udp.WriteTo(buf[:n], from)
		}
	}()
	ready()

	<-ctx.Done()
	echo.Close()
	discard.Close()
	udp.Close()
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	return nil
}
