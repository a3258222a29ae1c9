package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"reflect"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/tap"
)

// Options configure Run.
type Options struct {
	Device   string       // TAP device name
	Addr     netip.Prefix // the stack's address
	Host     netip.Prefix // the kernel side's address; zero for none
	MTU      int          // IP MTU; 0 for the default
	PcapFile string       // record frames here when not empty
}

// Ports served.
const (
	EchoPort    = 7
	DiscardPort = 9
)

// Run creates the device, runs the stack and serves until ctx is done, then
// writes the stack's counters to out, closes the stack (which removes the
// device) and returns. It writes "ready" to out once it serves.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	ep, err := tap.New(tap.Config{Name: opts.Device, MTU: opts.MTU, Host: opts.Host})
	if err != nil {
		return err
	}
	var link stack.LinkEndpoint = ep
	var rec *recorder.Endpoint
	if opts.PcapFile != "" {
		if rec, err = recorder.Create(ep, opts.PcapFile); err != nil {
			ep.Close()
			return err
		}
		link = rec
	}
	cfg := tickwire.Config{Link: link, MAC: ep.MAC(), Addr: opts.Addr, MTU: opts.MTU}
	if opts.MTU > 0 && opts.MTU-40 < tickwire.DefaultMSS {
		cfg.MSS = opts.MTU - 40 // a full segment must fit a smaller MTU
	}
	s, err := tickwire.New(cfg)
	if err != nil {
		link.Close()
		return err
	}
	serveErr := Serve(ctx, s, func() {
		fmt.Fprintf(out, "tapdemo: stack %s (MAC %s) on %s, kernel side %v\n", opts.Addr, ep.MAC(), ep.Name(), opts.Host)
		fmt.Fprintln(out, "ready")
	})
	st := s.Stats()
	s.Close() // closes rec and ep: the device goes away
	PrintStats(out, st)
	ts := ep.Stats()
	fmt.Fprintf(out, "tap %s: %d frames in (%d for other hosts, %d too long dropped), %d out (%d dropped)\n",
		ep.Name(), ts.RxFrames, ts.RxOtherHost, ts.RxTooLong, ts.TxFrames, ts.TxDropped)
	if rec != nil {
		rs := rec.Stats()
		fmt.Fprintf(out, "pcap: %d frames sent, %d received, recorded to %s\n", rs.Sent, rs.Received, opts.PcapFile)
		if err := rec.Err(); err != nil && serveErr == nil {
			serveErr = err
		}
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

// PrintStats writes the non-zero counters of st, one per line.
func PrintStats(out io.Writer, st tickwire.Stats) {
	fmt.Fprintln(out, "stats:")
	v := reflect.ValueOf(st)
	for i := range v.NumField() {
		if f := v.Field(i); f.CanUint() && f.Uint() != 0 {
			fmt.Fprintf(out, "  %-20s %d\n", v.Type().Field(i).Name, f.Uint())
		}
	}
}
