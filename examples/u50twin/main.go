// Command u50twin runs the software twin of the U50 offload engine as a
// program: it creates the region file (the register window and the result
// rings, REGISTERS.md), prints "ready" once MAGIC is readable, consumes its
// pcap only once a host sets CONTROL.RUN, sets STATUS.INPUT_DONE when the
// capture is finished, and removes the file on SIGTERM or SIGINT.
//
//	go run ./examples/u50twin -region /dev/shm/u50 -pcap feed.pcap [-speed X] [-ring-log2 N]
//	go run ./examples/u50twin -region /dev/shm/u50 -tap tw0 -addr 10.201.0.2/24 -host 10.201.0.1/24
//
// With -tap the twin's network port is a TAP device (created when it does
// not exist, removed on exit; root or CAP_NET_ADMIN): its general TOE and
// UDP serve the host path's command ring there, at -addr, and -host gives
// the kernel side its address, so the kernel reaches the host's LISTEN and
// UDP_BIND ports. -pcap and -tap may be given together.
//
// A host opens it with hwoffload.Open(ctx, "twin:/dev/shm/u50"), or
// inspects it with examples/hwctl.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/link/tap"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	if err := run(os.Args[1:], os.Stdout, sig); err != nil {
		fmt.Fprintln(os.Stderr, "u50twin:", err)
		os.Exit(1)
	}
}

// run parses args, runs the twin and prints "ready" to out once MAGIC is
// written; it returns when stop delivers, after removing the region.
func run(args []string, out io.Writer, stop <-chan os.Signal) error {
	tw, input, err := start(args)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ready") // New returns after MAGIC is written
	<-stop
	err = tw.Close() // removes the region file, closes the TAP device
	closeInput(input)
	return err
}

// start parses args and starts the twin. A TAP device is created in the
// calling thread's network namespace.
// The pcap reader, when there is one, is returned for the caller to close
// after the twin.
func start(args []string) (tw *twin.Twin, input io.Closer, err error) {
	fs := flag.NewFlagSet("u50twin", flag.ContinueOnError)
	region := fs.String("region", "", "region file to create, e.g. /dev/shm/u50 (required)")
	pcapFile := fs.String("pcap", "", "capture to replay as the engine's input")
	speed := fs.Float64("speed", 0, "replay pace: 0 as fast as the engine takes frames, 1 the recorded pace, x times it")
	ringLog2 := fs.Int("ring-log2", twin.DefaultRingLog2, "every ring's LOG2_SLOTS, from 4 to 20")
	addr := fs.String("addr", "", "initial IP_ADDR/NETMASK, e.g. 10.0.0.2/24 (a host write before RUN wins)")
	tapDev := fs.String("tap", "", "TAP device for the host path (the general TOE and UDP)")
	host := fs.String("host", "", "with -tap: the kernel side's address, e.g. 10.0.0.1/24 (none when empty)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if *region == "" || *pcapFile == "" && *tapDev == "" {
		return nil, nil, fmt.Errorf("-region and -pcap or -tap are required (see -h)")
	}
	cfg := twin.Config{Region: *region, Speed: *speed, RingLog2: *ringLog2}
	if *addr != "" {
		p, err := netip.ParsePrefix(*addr)
		if err != nil {
			return nil, nil, fmt.Errorf("-addr: %w", err)
		}
		cfg.Addr = p
	}
	var hostPrefix netip.Prefix
	if *host != "" {
		p, err := netip.ParsePrefix(*host)
		if err != nil {
			return nil, nil, fmt.Errorf("-host: %w", err)
		}
		hostPrefix = p
	}
	if *pcapFile != "" {
		src, err := pcap.Open(*pcapFile)
		if err != nil {
			return nil, nil, err
		}
		cfg.Input, input = src, src
	}
	if *tapDev != "" {
		ep, err := tap.New(tap.Config{Name: *tapDev, Host: hostPrefix})
		if err != nil {
			closeInput(input)
			return nil, nil, fmt.Errorf("-tap: %w", err)
		}
		cfg.Link = ep
	}
	tw, err = twin.New(cfg)
	if err != nil {
		if cfg.Link != nil {
			cfg.Link.Close()
		}
		closeInput(input)
		return nil, nil, err
	}
	return tw, input, nil
}

func closeInput(c io.Closer) {
	if c != nil {
		c.Close()
	}
}
