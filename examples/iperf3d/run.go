package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"reflect"

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
	Port     int          // iperf3 port; 0 for DefaultPort
	Buffer   int          // TCP buffers per connection; 0 for tickwire's default
}

// Run creates the device, runs the stack and serves iperf3 until ctx is
// done, then writes the stack's counters to out, closes the stack (which
// removes the device) and returns. It writes "ready" to out once it serves.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
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
	s, err := tickwire.New(tickwire.Config{Link: link, MAC: ep.MAC(), Addr: opts.Addr, MTU: opts.MTU,
		SendBuffer: opts.Buffer, ReceiveBuffer: opts.Buffer})
	if err != nil {
		link.Close()
		return err
	}
	defer s.Close() // closes rec and ep: the device goes away
	ln, err := s.ListenTCP(uint16(opts.Port))
	if err != nil {
		return err
	}
	pc, err := s.ListenUDP(uint16(opts.Port))
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Fprintf(out, "iperf3d: stack %s (MAC %s) on %s, kernel side %v, iperf3 port %d\n", opts.Addr, ep.MAC(), ep.Name(), opts.Host, opts.Port)
	fmt.Fprintln(out, "ready")
	serveErr := NewServer(ln, pc, out).Serve(ctx)
	printStats(out, s.Stats())
	if rec != nil {
		rs := rec.Stats()
		fmt.Fprintf(out, "pcap: %d frames sent, %d received, recorded to %s\n", rs.Sent, rs.Received, opts.PcapFile)
		if err := rec.Err(); err != nil && serveErr == nil {
			serveErr = err
		}
	}
	return serveErr
}

// printStats writes the non-zero counters of st, one per line.
func printStats(out io.Writer, st tickwire.Stats) {
	fmt.Fprintln(out, "stats:")
	v := reflect.ValueOf(st)
	for i := range v.NumField() {
		if f := v.Field(i); f.CanUint() && f.Uint() != 0 {
			fmt.Fprintf(out, "  %-20s %d\n", v.Type().Field(i).Name, f.Uint())
		}
	}
}
