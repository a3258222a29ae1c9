// Command nicsim runs the software NIC of link/dmaring/nicsim in a process
// of its own: the split a real card gives, with the host program (the
// driver side, a link/dmaring Endpoint) and the device in two processes
// that share only the region file.
//
//	go run ./examples/nicsim -region /dev/shm/NAME [-queues N] -tap NAME [-host H/P]
//	go run ./examples/nicsim -region /dev/shm/NAME [-queues N] -pcap FILE [-speed 0|1]
//
// The host creates the region first, with dmaring.New(dmaring.Config{Path:
// "/dev/shm/NAME", Shared: true, Queues: N}), which lays out and programs
// the queues; nicsim then maps the file, serves its queues and prints
// "ready" on stdout. The two sides wake each other through futex words in
// the region's header (dmaring.RegionWakeups), so either may sleep when
// idle. nicsim serves until SIGTERM or SIGINT, then prints its counters on
// stderr, removes what it created (the TAP device) and exits 0; it never
// removes the region, which is the host's.
//
// Flags:
//
//	-region PATH   the host's region file (required)
//	-queues N      the queue pairs expected; 0 (default) takes the region's,
//	               another number that differs from it is an error
//	-tap NAME      wire: create TAP device NAME (root), addressed to the
//	               host's MAC (from the region header): the kernel is the peer
//	-host H/P      with -tap: the kernel side's address (none by default)
//	-pcap FILE     wire: replay the capture into the RX queues (RSS spreads
//	               the flows), then keep serving
//	-speed 0|1     with -pcap: 0 (default) as fast as the rings take the
//	               frames, without loss; 1 at the recorded pace, dropping
//	               (and counting) what finds a ring empty, as a NIC does
//	-poll D        how long the TX loop polls after its last frame before it
//	               sleeps (default 0: sleep at once)
//
// Exit status: 0 after a signal, 1 when the region cannot be served or the
// wire not made, 2 for bad flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/link/tap"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sig))
}

// run serves the region named in args until stop delivers, printing
// "ready" to stdout once it serves; it returns the exit status.
func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	fs := flag.NewFlagSet("nicsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	region := fs.String("region", "", "the host's region `file`, e.g. /dev/shm/tw0 (required)")
	queues := fs.Int("queues", 0, "queue pairs expected (0: the region's)")
	tapName := fs.String("tap", "", "create TAP device `NAME` as the wire (root)")
	var host netip.Prefix
	fs.Func("host", "with -tap: the kernel side's address, `H/P`", func(v string) (err error) {
		host, err = netip.ParsePrefix(v)
		return err
	})
	pcapFile := fs.String("pcap", "", "replay capture `FILE` into the RX queues")
	speed := fs.Int("speed", 0, "with -pcap: 0 as fast as the rings take the frames, 1 at the recorded pace")
	poll := fs.Duration("poll", 0, "TX polling before sleeping")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "nicsim:", msg)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected arguments %q", fs.Args()))
	case *region == "":
		return usage("-region is required")
	case (*tapName == "") == (*pcapFile == ""):
		return usage("give one wire: -tap NAME or -pcap FILE")
	case *speed != 0 && *speed != 1:
		return usage("-speed is 0 or 1")
	case *queues < 0 || *queues > dmaring.MaxQueues:
		return usage(fmt.Sprintf("-queues %d: want 0 to %d", *queues, dmaring.MaxQueues))
	case host.IsValid() && *tapName == "":
		return usage("-host goes with -tap")
	}

	fail := func(err error) int {
		fmt.Fprintln(stderr, "nicsim:", err)
		return 1
	}
	f, err := os.OpenFile(*region, os.O_RDWR, 0)
	if err != nil {
		return fail(err)
	}
	r, err := dmaring.OpenRegion(f)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", *region, err))
	}
	defer r.Close()
	if n := r.Layout().Queues; *queues != 0 && *queues != n {
		return fail(fmt.Errorf("%s has %d queue pairs, not the %d of -queues", *region, n, *queues))
	}
	wake, err := dmaring.RegionWakeups(r)
	if err != nil {
		return fail(err)
	}

	var wire nicsim.Wire
	var replay *nicsim.Replay
	if *tapName != "" {
		tw, err := nicsim.NewTapWire(tap.Config{Name: *tapName, MAC: r.HostMAC(), Host: host, MTU: tapMTU(r)})
		if err != nil {
			return fail(err)
		}
		wire = tw
	} else {
		src, err := pcap.Open(*pcapFile)
		if err != nil {
			return fail(err)
		}
		replay = nicsim.NewReplay(src, nicsim.ReplayConfig{Paced: *speed == 1, Lossless: *speed == 0})
		wire = replay
	}
	dev, err := nicsim.New(nicsim.Config{Region: r, Wakeups: wake, Wire: wire, Poll: *poll})
	if err != nil {
		wire.Close()
		return fail(err)
	}
	fmt.Fprintf(stdout, "nicsim: serving %s (%d queue pairs)\nready\n", *region, r.Layout().Queues)
	start := time.Now()
	<-stop
	dev.Close() // closes the wire: the TAP device goes with it
	st := dev.Stats()
	fmt.Fprintf(stderr, "nicsim: %v: tx %d frames %d bytes; rx %d frames %d bytes; dropped rx: %d no descriptor, %d queue not enabled, %d completion queue full; %d errors, %d events dropped\n",
		time.Since(start).Round(time.Millisecond), st.TxFrames, st.TxBytes, st.RxFrames, st.RxBytes,
		st.RxNoDescriptor, st.RxNotRunning, st.RxCQFull, st.Errors, st.EventsDropped)
	if replay != nil {
		frames, dropped := replay.Counts()
		fmt.Fprintf(stderr, "nicsim: replay: %d frames, %d dropped\n", frames, dropped)
		if err := replay.Err(); err != nil && !errors.Is(err, io.EOF) {
			return fail(err)
		}
	}
	return 0
}

// tapMTU is the largest IP packet a buffer of the region holds.
func tapMTU(r *dmaring.Region) int { return min(r.Layout().BufSize-14, 65521) }
