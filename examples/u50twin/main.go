// Command u50twin runs the software twin of the U50 offload engine as a
// program: it creates the region file (the register window and the result
// rings, REGISTERS.md), prints "ready" once MAGIC is readable, consumes its
// pcap only once a host sets CONTROL.RUN, sets STATUS.INPUT_DONE when the
// capture is finished, and removes the file on SIGTERM or SIGINT.
//
//	go run ./examples/u50twin -region /dev/shm/u50 -pcap feed.pcap [-speed X] [-ring-log2 N]
//
// A host opens it with hwoffload.Open(ctx, "twin:/dev/shm/u50"), or
// inspects it with examples/hwctl. -tap (the general TOE and UDP host path
// on a TAP device) is not implemented yet.
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
	fs := flag.NewFlagSet("u50twin", flag.ContinueOnError)
	region := fs.String("region", "", "region file to create, e.g. /dev/shm/u50 (required)")
	pcapFile := fs.String("pcap", "", "capture to replay as the engine's input (required)")
	speed := fs.Float64("speed", 0, "replay pace: 0 as fast as the engine takes frames, 1 the recorded pace, x times it")
	ringLog2 := fs.Int("ring-log2", twin.DefaultRingLog2, "every ring's LOG2_SLOTS, from 4 to 20")
	addr := fs.String("addr", "", "initial IP_ADDR/NETMASK, e.g. 10.0.0.2/24 (a host write before RUN wins)")
	tap := fs.String("tap", "", "TAP device for the host path (not implemented yet)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tap != "" {
		return fmt.Errorf("-tap: the host path over TAP is not implemented yet")
	}
	if *region == "" || *pcapFile == "" {
		return fmt.Errorf("-region and -pcap are required (see -h)")
	}
	cfg := twin.Config{Region: *region, Speed: *speed, RingLog2: *ringLog2}
	if *addr != "" {
		p, err := netip.ParsePrefix(*addr)
		if err != nil {
			return fmt.Errorf("-addr: %w", err)
		}
		cfg.Addr = p
	}
	src, err := pcap.Open(*pcapFile)
	if err != nil {
		return err
	}
	defer src.Close()
	cfg.Input = src
	tw, err := twin.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ready") // New returns after MAGIC is written
	<-stop
	return tw.Close() // removes the region file
}
