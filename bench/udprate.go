package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire"
)

// udp_rx_64B and udp_rx_64B_readfrom: the highest rate at which a receiver
// takes 64-byte datagrams with under 0.1% loss.
//
// A sender goroutine writes through a UDP socket (tickwire: a DialUDP
// socket on the client stack of a link/pipe pair; kernel: a net.UDPConn
// connected over 127.0.0.1), paced to a target rate; the receiver counts
// what it gets. Over link/pipe the receiving stack runs on the sender's
// goroutine, as the kernel's loopback runs the receiving softirq in the
// sender's system call, so a ServeUDP handler (run there too) slows the
// sender rather than losing datagrams, while a reader goroutine (ReadFrom,
// or the kernel socket's reader) is fed through a queue that overflows when
// the reader falls behind. A trial sends for udpTrialDur at one rate and
// waits for the receiver to settle; loss is what was sent and never
// counted. The search first sends unpaced (the sender's own limit); if that
// loses 0.1% or more it halves the rate until a trial does not, then
// bisects (udpMaxRate). The value is the highest received rate of a trial
// under the loss bound.

const (
	udpRateSize   = 64
	udpRatePort   = 9
	udpMaxLoss    = 0.001 // the loss bound: 0.1%
	udpBisections = 4
	// udpFloor is the datagrams of a trial at the lowest rate tried: fewer
	// than either receiver queues (128 ring slots, the kernel's 208 KiB of
	// receive buffer), so that even a receiver descheduled for the whole
	// trial loses nothing.
	udpFloor = 64
	// udpSettle is how long the receiver may go without counting anything
	// before a trial's stragglers are declared lost.
	udpSettle = 20 * time.Millisecond
)

// udpRateRig is one side of a rate measure.
type udpRateRig struct {
	send     func(b []byte) error // one datagram; an error ends the measure
	received func() int64         // datagrams counted by the receiver so far
	// dropped, when not nil, is the receiving stack's count of datagrams it
	// dropped (Stats.DropUDPBufferFull and the link's drops): a trial has
	// settled once received + dropped reaches what was sent.
	dropped func() int64
	close   func()
}

// udpTrial sends at rate datagrams/s (0: as fast as the sender goes) for
// dur and reports the datagrams sent and received and the send phase's
// length.
func udpTrial(r *udpRateRig, rate float64, dur time.Duration) (sent, got int64, elapsed time.Duration, err error) {
	buf := make([]byte, udpRateSize)
	got0, drop0 := r.received(), int64(0)
	if r.dropped != nil {
		drop0 = r.dropped()
	}
	start := time.Now()
	for {
		elapsed = time.Since(start)
		if elapsed >= dur {
			break
		}
		due := int64(1 << 62)
		if rate > 0 {
			due = int64(rate * elapsed.Seconds())
		}
		if sent >= due {
			runtime.Gosched()
			continue
		}
		// A burst of at most 16 between clock reads.
		for n := min(due-sent, 16); n > 0; n-- {
			if err := r.send(buf); err != nil {
				return sent, 0, elapsed, err
			}
			sent++
		}
	}
	last, quiet := r.received(), time.Now()
	for {
		got = r.received() - got0
		dropped := int64(0)
		if r.dropped != nil {
			dropped = r.dropped() - drop0
		}
		if got+dropped >= sent {
			return sent, got, elapsed, nil
		}
		if n := r.received(); n != last {
			last, quiet = n, time.Now()
		} else if time.Since(quiet) > udpSettle {
			return sent, got, elapsed, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// udpMaxRate searches the highest loss-free rate of r (see the file's
// comment), in datagrams/s; ops and allocs cover every datagram sent. It
// sends unpaced first; if that loses, it halves the rate until a trial does
// not (at udpFloor datagrams per trial the receiver's queue holds a whole
// trial, so the halving ends), then bisects between that rate and the
// double for udpBisections trials.
func udpMaxRate(r *udpRateRig, dur time.Duration) (sample, error) {
	trialDur := max(dur/4, 10*time.Millisecond)
	floor := udpFloor / trialDur.Seconds()
	var s sample
	m0 := mallocs()
	best := 0.0
	try := func(rate float64) (float64, bool, error) {
		sent, got, elapsed, err := udpTrial(r, rate, trialDur)
		s.ops += sent
		if err != nil {
			return 0, false, err
		}
		if sent == 0 {
			return 0, false, errors.New("nothing sent")
		}
		achieved := float64(got) / elapsed.Seconds()
		ok := float64(sent-got) < udpMaxLoss*float64(sent)
		if ok && achieved > best {
			best = achieved
		}
		return float64(sent) / elapsed.Seconds(), ok, nil
	}
	offered, ok, err := try(0)
	if err != nil {
		return s, err
	}
	if !ok {
		hi := offered
		lo := hi / 2
		for {
			if _, ok, err = try(lo); err != nil {
				return s, err
			}
			if ok || lo <= floor {
				break
			}
			hi, lo = lo, max(lo/2, floor)
		}
		for range udpBisections {
			mid := (lo + hi) / 2
			if _, ok, err = try(mid); err != nil {
				return s, err
			}
			if ok {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	s.allocs = mallocs() - m0
	if best == 0 {
		return s, fmt.Errorf("every trial lost %.1f%% or more, down to %.0f datagrams/s", udpMaxLoss*100, floor)
	}
	s.value = best
	return s, nil
}

// tickwireRateRig builds the tickwire side: a client stack's DialUDP socket
// sending over link/pipe to a server stack receiving with a ServeUDP handler
// (readFrom false) or a goroutine in ReadFrom.
func tickwireRateRig(readFrom bool) (*udpRateRig, error) {
	sp, err := newStackPair(0, 0, false)
	if err != nil {
		return nil, err
	}
	var count atomic.Int64
	var wg sync.WaitGroup
	var srv *tickwire.UDPConn
	if readFrom {
		if srv, err = sp.server.ListenUDP(udpRatePort); err == nil {
			countDatagrams(func(b []byte) error { _, _, err := srv.ReadFrom(b); return err }, &count, &wg)
		}
	} else {
		srv, err = sp.server.ServeUDP(udpRatePort, func(*tickwire.UDPConn, []byte, netip.AddrPort) { count.Add(1) })
	}
	if err != nil {
		sp.Close()
		return nil, err
	}
	c, err := sp.client.DialUDP(netip.AddrPortFrom(serverPrefix.Addr(), udpRatePort))
	if err != nil {
		srv.Close()
		wg.Wait()
		sp.Close()
		return nil, err
	}
	return &udpRateRig{
		send:     func(b []byte) error { _, err := c.Write(b); return err },
		received: count.Load,
		dropped: func() int64 {
			st := sp.server.Stats()
			return int64(st.DropUDPBufferFull + sp.link.Stats().Dropped)
		},
		close: func() {
			c.Close()
			srv.Close()
			wg.Wait()
			sp.Close()
		},
	}, nil
}

// countDatagrams counts in count the datagrams read returns, on a goroutine
// of its own (in wg) that ends when read fails with net.ErrClosed.
func countDatagrams(read func(b []byte) error, count *atomic.Int64, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			if err := read(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			count.Add(1)
		}
	}()
}

// kernelRcvBuf is the kernel baseline socket's SO_RCVBUF: 4 MiB, the
// usual net.core.rmem_max (the kernel caps the request there).
const kernelRcvBuf = 4 << 20

// kernelRateRig builds the kernel side: a connected net.UDPConn sending to a
// socket on 127.0.0.1 whose reader goroutine reads with
// ReadFromUDPAddrPort, or with ReadFrom when readFrom is set. A failed send
// (ENOBUFS) counts as sent and lost. The socket asks for a receive buffer
// of kernelRcvBuf, so that the baseline is the kernel's best, not its
// default buffer's.
func kernelRateRig(readFrom bool) (*udpRateRig, error) {
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	if err := pc.SetReadBuffer(kernelRcvBuf); err != nil {
		pc.Close()
		return nil, err
	}
	read := func(b []byte) error { _, _, err := pc.ReadFromUDPAddrPort(b); return err }
	if readFrom {
		read = func(b []byte) error { _, _, err := pc.ReadFrom(b); return err }
	}
	var count atomic.Int64
	var wg sync.WaitGroup
	countDatagrams(read, &count, &wg)
	c, err := net.DialUDP("udp4", nil, pc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		pc.Close()
		wg.Wait()
		return nil, err
	}
	return &udpRateRig{
		send:     func(b []byte) error { c.Write(b); return nil },
		received: count.Load,
		close: func() {
			c.Close()
			pc.Close()
			wg.Wait()
		},
	}, nil
}

// setupUDPRate builds udp_rx_64B (readFrom false) or udp_rx_64B_readfrom.
func setupUDPRate(readFrom bool) func(p params) (*pair, error) {
	return func(p params) (*pair, error) {
		tw, err := tickwireRateRig(readFrom)
		if err != nil {
			return nil, err
		}
		k, err := kernelRateRig(readFrom)
		if err != nil {
			tw.close()
			return nil, err
		}
		return &pair{
			tickwire: func() (sample, error) { return udpMaxRate(tw, p.dur) },
			baseline: func() (sample, error) { return udpMaxRate(k, p.dur) },
			close: func() {
				tw.close()
				k.close()
			},
		}, nil
	}
}
