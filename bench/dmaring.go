package main

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pipe"
	"github.com/tickwire/tickwire/mirror"
)

// ---- dmaring ----

// dmaringRingLog is the RX ring of the dmaring measures: 4096 entries, one
// mirror pass.
const dmaringRingLog = 12

// dmaringRig is an endpoint and a software NIC with no wire: the measures
// put frames into the RX rings with Device.ReceiveOn.
type dmaringRig struct {
	ep  *dmaring.Endpoint
	dev *nicsim.Device
}

func newDmaringRig(queues int) (*dmaringRig, error) {
	cfg := dmaring.Config{Queues: queues, RingLog: dmaringRingLog}
	ep, err := dmaring.New(cfg) // a memfd, as a device in another process would map
	if errors.Is(err, dmaring.ErrNotSupported) {
		cfg.InMemory = true
		ep, err = dmaring.New(cfg)
	}
	if err != nil {
		return nil, err
	}
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups()})
	if err != nil {
		ep.Close()
		return nil, err
	}
	return &dmaringRig{ep: ep, dev: dev}, nil
}

func (r *dmaringRig) close() {
	r.dev.Close()
	r.ep.Close()
}

// fill puts n copies of f into RX queue q.
func (r *dmaringRig) fill(q, n int, f []byte) error {
	for range n {
		if err := r.dev.ReceiveOn(q, f, 0); err != nil {
			return err
		}
	}
	return nil
}

// rawFrame is an Ethernet frame of size bytes with a local experimental
// EtherType, which no checksum or protocol code looks into.
func rawFrame(size int) []byte {
	f := make([]byte, size)
	copy(f, flowDstMAC)
	copy(f[6:], flowSrcMAC)
	f[12], f[13] = 0x88, 0xb5
	return f
}

// nopDispatcher counts the frames a pipe end delivers.
type nopDispatcher struct{ n atomic.Int64 }

func (d *nopDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	d.n.Add(1)
}
func (d *nopDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// queueWorkers runs one goroutine per queue for the life of a measure and
// times rounds of them: each round, every worker runs consume for its queue.
// Between the rounds of a sample the workers spin (yielding), as busy-polling
// readers do, and a round starts when all of them are running (a barrier).
// A goroutine started per round, or woken from a channel, cost the
// two-queue rows most of their scaling: the second goroutine waited for an
// idle P's thread to wake and steal it (20 to 40 us of a ~90 us round);
// readers woken from a channel each round still took twice as long with
// two queues as with one (likely the woken thread placed on the waker's
// CPU, sharing it until the kernel moved it), spinning ones did not.
type queueWorkers struct {
	consume func(q int) error
	wake    []chan struct{} // a sample begins
	round   atomic.Int64    // rounds begun
	arrived atomic.Int64    // workers that reached the barrier, over all rounds
	ending  atomic.Bool     // the sample is over: stop spinning
	t0, t1  []time.Time     // each worker's consume start and end in the last round
	errs    []error
	done    sync.WaitGroup // the round's workers
	parked  sync.WaitGroup // the sample's workers
	exited  sync.WaitGroup
}

func newQueueWorkers(queues int, consume func(q int) error) *queueWorkers {
	w := &queueWorkers{
		consume: consume, wake: make([]chan struct{}, queues),
		t0: make([]time.Time, queues), t1: make([]time.Time, queues), errs: make([]error, queues),
	}
	for q := range queues {
		w.wake[q] = make(chan struct{}, 1)
		w.exited.Add(1)
		go w.work(q)
	}
	return w
}

func (w *queueWorkers) work(q int) {
	defer w.exited.Done()
	n := int64(len(w.wake))
	var seen int64
	for range w.wake[q] {
		for {
			// Wait for the next round; Gosched lets the caller fill the
			// rings (and the other workers run) on a small GOMAXPROCS.
			for spins := 0; w.round.Load() == seen && !w.ending.Load(); spins++ {
				if spins%64 == 63 {
					runtime.Gosched()
				}
			}
			if w.round.Load() == seen {
				break // ending
			}
			seen++
			w.arrived.Add(1)
			for spins := 0; w.arrived.Load() < seen*n; spins++ {
				if spins%64 == 63 {
					runtime.Gosched()
				}
			}
			w.t0[q] = time.Now()
			w.errs[q] = w.consume(q)
			w.t1[q] = time.Now()
			w.done.Done()
		}
		w.parked.Done()
	}
}

// begin starts a sample: the workers spin until end.
func (w *queueWorkers) begin() {
	w.ending.Store(false)
	w.parked.Add(len(w.wake))
	for _, c := range w.wake {
		c <- struct{}{}
	}
}

// end ends a sample and waits for the workers to park.
func (w *queueWorkers) end() {
	w.ending.Store(true)
	w.parked.Wait()
}

// run times one round (between begin and end): from the first worker
// leaving the barrier to the last one done.
func (w *queueWorkers) run() (time.Duration, error) {
	w.done.Add(len(w.wake))
	w.round.Add(1)
	w.done.Wait()
	first, last := w.t0[0], w.t1[0]
	for q := range w.wake {
		first, last = minTime(first, w.t0[q]), maxTime(last, w.t1[q])
	}
	return last.Sub(first), errors.Join(w.errs...)
}

func (w *queueWorkers) close() {
	for _, c := range w.wake {
		close(c)
	}
	w.exited.Wait()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// evictBytes is more than a core's private caches hold (512 KiB of L2 on
// the CI machine, a few MiB on large server cores).
const evictBytes = 8 << 20

// evictCaches writes a line of every 64 bytes of buf, which pushes what
// the filling core wrote before (the frames, completions) out of its own
// caches into the shared one, where a NIC's DMA writes leave them (DDIO).
// Without it a reader that happened to run on the filling core read them
// from its L2 (21 ns a frame) and one on the other core from that core
// (up to 36 ns): the one-queue row mostly got the first, the two-queue
// row always had one of each.
func evictCaches(buf []byte) {
	for i := 0; i < len(buf); i += 64 {
		buf[i]++
	}
}

// setupDmaringRx: the host consuming pre-filled RX rings, one goroutine
// per queue, against link/pipe delivering the same frames, one pipe and
// goroutine per queue. A sample's rate is one round's frames over the
// median round's time: on a 2-core machine shared with other processes, a
// round in which one of them holds a core stalls a two-queue round for a
// scheduler slice (milliseconds, against ~100 us rounds), which is the
// machine's cost, not the rings'.
func setupDmaringRx(queues, size int) func(p params) (*pair, error) {
	return func(p params) (*pair, error) {
		rig, err := newDmaringRig(queues)
		if err != nil {
			return nil, err
		}
		const entries = 1 << dmaringRingLog
		f := rawFrame(size)
		batches := make([][]frame.Frame, queues)
		for i := range batches {
			batches[i] = frame.NewBatch(64, 2048)
		}
		type pipePair struct {
			a *pipe.Endpoint
			d *nopDispatcher
		}
		pipes := make([]pipePair, queues)
		for i := range pipes {
			a, b := pipe.New(pipe.Options{})
			d := &nopDispatcher{}
			b.Attach(d)
			pipes[i] = pipePair{a, d}
		}
		evict := make([]byte, evictBytes)
		ringWorkers := newQueueWorkers(queues, func(q int) error {
			rq := rig.ep.RxQueue(q)
			for got := 0; got < entries; {
				n, err := rq.ReadFrames(batches[q])
				if err != nil {
					return err
				}
				got += n
			}
			return nil
		})
		pipeWorkers := newQueueWorkers(queues, func(q int) error {
			for range entries {
				if err := pipes[q].a.Send(f); err != nil {
					return err
				}
			}
			return nil
		})
		// rounds runs timed rounds of queues*entries frames until p.dur of
		// timed time.
		rounds := func(prepare func() error, w *queueWorkers) (sample, error) {
			var timed time.Duration
			times := make([]float64, 0, int(p.dur/(10*time.Microsecond))+1)
			m0 := mallocs()
			w.begin()
			defer w.end()
			for timed < p.dur && len(times) < cap(times) {
				if err := prepare(); err != nil {
					return sample{}, err
				}
				d, err := w.run()
				if err != nil {
					return sample{}, err
				}
				timed += d
				times = append(times, d.Seconds())
			}
			frames := int64(len(times) * queues * entries)
			return sample{value: float64(queues*entries) / median(times) / 1e6, ops: frames, allocs: mallocs() - m0}, nil
		}
		return &pair{
			tickwire: func() (sample, error) {
				return rounds(func() error {
					for q := range queues {
						if err := rig.fill(q, entries, f); err != nil {
							return err
						}
					}
					evictCaches(evict)
					return nil
				}, ringWorkers)
			},
			baseline: func() (sample, error) {
				return rounds(func() error { return nil }, pipeWorkers)
			},
			close: func() {
				ringWorkers.close()
				pipeWorkers.close()
				rig.close()
				for _, pp := range pipes {
					pp.a.Close()
					pp.a.Peer().Close()
				}
			},
		}, nil
	}
}

// latencyLoop times frames one at a time: send hands frame k to its path,
// the receiving side calls got(k) when it has it; the latency is from
// before send to got. It runs for p.dur or until the samples are full.
type latencyLoop struct {
	base time.Time
	seen atomic.Int64 // frames received
	at   atomic.Int64 // receive time of the last one, since base
}

func (l *latencyLoop) got() {
	l.at.Store(int64(time.Since(l.base)))
	l.seen.Add(1)
}

func (l *latencyLoop) run(dur time.Duration, send func() error) (sample, error) {
	s := sample{lat: make([]time.Duration, 0, min(maxLatencySamples, max(1024, int(dur/(500*time.Nanosecond)))))}
	m0 := mallocs()
	end := time.Now().Add(dur)
	for len(s.lat) < cap(s.lat) && time.Now().Before(end) {
		want := l.seen.Load() + 1
		t0 := time.Since(l.base)
		if err := send(); err != nil {
			return s, err
		}
		deadline := time.Now().Add(5 * time.Second)
		for l.seen.Load() < want {
			if time.Now().After(deadline) {
				return s, errors.New("frame not received within 5 s")
			}
			runtime.Gosched()
		}
		s.lat = append(s.lat, time.Duration(l.at.Load())-t0)
	}
	s.allocs = mallocs() - m0
	s.ops = int64(len(s.lat))
	return s, nil
}

// setupDmaringLatency: one frame from the device's receive to the host's
// ReadFrames returning it, the reader busy-polling, against link/pipe's
// Send to its peer's dispatcher.
func setupDmaringLatency(p params) (*pair, error) {
	rig, err := newDmaringRig(1)
	if err != nil {
		return nil, err
	}
	rig.ep.SetBusyPoll(time.Hour)
	f := rawFrame(64)
	ring := &latencyLoop{base: time.Now()}
	readerDone := make(chan error, 1)
	go func() {
		batch := frame.NewBatch(8, 2048)
		q := rig.ep.RxQueue(0)
		for {
			n, err := q.ReadFrames(batch)
			for range n {
				ring.got()
			}
			if err != nil {
				readerDone <- err
				return
			}
		}
	}()
	a, b := pipe.New(pipe.Options{})
	pl := &latencyLoop{base: time.Now()}
	b.Attach(latencyDispatcher{pl})
	return &pair{
		tickwire: func() (sample, error) { return ring.run(p.dur, func() error { return rig.dev.Receive(f, 0) }) },
		baseline: func() (sample, error) { return pl.run(p.dur, func() error { return a.Send(f) }) },
		close: func() {
			rig.close()
			<-readerDone
			a.Close()
			b.Close()
		},
	}, nil
}

type latencyDispatcher struct{ l *latencyLoop }

func (d latencyDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	d.l.got()
}
func (latencyDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// setupDmaringMirror: mirror segments per second fed from an RX ring
// (BorrowFrames, in place), the checksums taken as the ring verified them
// (HandleVerifiedLinkFrame, as mirrorfeed -link dmaring does through
// feed.HandleSourceFrame), against the same frames from memory, whose
// checksums mirror computes, as it does for a capture file.
func setupDmaringMirror(p params) (*pair, error) {
	payloads, order := mirrorPayloads(0)
	ringFrames, err := buildFlow(payloads, order)
	if err != nil {
		return nil, err
	}
	memFrames, err := buildFlow(payloads, order)
	if err != nil {
		return nil, err
	}
	rig, err := newDmaringRig(1)
	if err != nil {
		return nil, err
	}
	hRing, hMem := &countHandler{}, &countHandler{}
	asmRing, err := mirror.New(mirror.Config{}, hRing)
	if err != nil {
		rig.close()
		return nil, err
	}
	asmMem, _ := mirror.New(mirror.Config{}, hMem)
	asmRing.HandleFrame(ringFrames.syn, 1)
	asmMem.HandleFrame(memFrames.syn, 1)
	q := rig.ep.RxQueue(0)
	borrowed := make([]frame.Frame, 64)
	return &pair{
		tickwire: func() (sample, error) {
			var n int64
			var timed time.Duration
			before := hRing.bytes
			m0 := mallocs()
			for timed < p.dur {
				for _, i := range ringFrames.order {
					if err := rig.dev.Receive(ringFrames.frames[i], 0); err != nil {
						return sample{}, err
					}
				}
				start := time.Now()
				for got := 0; got < len(ringFrames.order); {
					k, err := q.BorrowFrames(borrowed)
					if err != nil {
						return sample{}, err
					}
					for i := range borrowed[:k] {
						f := &borrowed[i]
						if !f.ChecksumVerified {
							return sample{}, errors.New("the ring did not verify a frame's checksums")
						}
						asmRing.HandleVerifiedLinkFrame(f.LinkType, f.Data(), f.Time)
					}
					q.ReleaseBorrowed()
					got += k
				}
				timed += time.Since(start)
				n += int64(len(ringFrames.order))
				ringFrames.advance()
			}
			s := sample{ops: n, allocs: mallocs() - m0, value: float64(n) / timed.Seconds()}
			if hRing.bytes-before != uint64(n)*mirrorMSS || hRing.gaps != 0 {
				return s, fmt.Errorf("delivered %d bytes of %d, %d gaps", hRing.bytes-before, n*mirrorMSS, hRing.gaps)
			}
			return s, nil
		},
		baseline: func() (sample, error) {
			m0 := mallocs()
			n, timed, err := memFrames.passes(p.dur, asmMem.HandleFrame)
			return sample{ops: n, allocs: mallocs() - m0, value: float64(n) / timed.Seconds()}, err
		},
		close: func() {
			asmRing.Close()
			asmMem.Close()
			rig.close()
		},
	}, nil
}

// setupDmaringWireToTrade: wire_to_trade with the frame entering at the
// device: the software NIC puts it in the RX ring, a busy-polling reader
// borrows it and hands it to feed; against the frame handed to feed
// directly (wire_to_trade's tickwire side).
func setupDmaringWireToTrade(p params) (*pair, error) {
	payloads, err := tradePayloads()
	if err != nil {
		return nil, err
	}
	ringFrames, err := buildFlow(payloads, nil)
	if err != nil {
		return nil, err
	}
	memFrames, err := buildFlow(payloads, nil)
	if err != nil {
		return nil, err
	}
	rig, err := newDmaringRig(1)
	if err != nil {
		return nil, err
	}
	rig.ep.SetBusyPoll(time.Hour)
	ringLoop := &latencyLoop{base: time.Now()}
	fdRing, err := feed.New(feed.Config{}, &loopTrades{l: ringLoop})
	if err != nil {
		rig.close()
		return nil, err
	}
	fdRing.HandleFrame(frame.LinkTypeEthernet, ringFrames.syn, 1)
	readerDone := make(chan error, 1)
	go func() {
		q := rig.ep.RxQueue(0)
		borrowed := make([]frame.Frame, 16)
		for {
			n, err := q.BorrowFrames(borrowed)
			for _, f := range borrowed[:n] {
				fdRing.HandleFrame(frame.LinkTypeEthernet, f.Data(), f.Time)
			}
			q.ReleaseBorrowed()
			if err != nil {
				readerDone <- err
				return
			}
		}
	}()
	stamper := &tradeStamper{}
	fdMem, err := feed.New(feed.Config{}, stamper)
	if err != nil {
		return nil, err
	}
	fdMem.HandleFrame(frame.LinkTypeEthernet, memFrames.syn, 1)
	return &pair{
		tickwire: func() (sample, error) {
			// One pass of trade frames at a time, each timed from the
			// device's receive to its trade; then the next pass.
			var out sample
			end := time.Now().Add(p.dur)
			for time.Now().Before(end) && len(out.lat) < maxLatencySamples {
				i := 0
				s, err := ringLoop.run(time.Until(end), func() error {
					if i == len(ringFrames.order) {
						return errFull
					}
					f := ringFrames.frames[ringFrames.order[i]]
					i++
					return rig.dev.Receive(f, 0)
				})
				out.lat = append(out.lat, s.lat...)
				out.ops += s.ops
				out.allocs += s.allocs
				if err != nil && !errors.Is(err, errFull) {
					return out, err
				}
				ringFrames.advance()
			}
			return out, nil
		},
		baseline: func() (sample, error) {
			s := sample{lat: make([]time.Duration, 0, min(maxLatencySamples, max(1024, int(p.dur/(200*time.Nanosecond)))))}
			m0 := mallocs()
			_, _, err := memFrames.passes(p.dur, func(f []byte, ts int64) error {
				if len(s.lat) == cap(s.lat) {
					return errFull
				}
				stamper.lastTrade = time.Time{}
				t0 := time.Now()
				if err := fdMem.HandleFrame(frame.LinkTypeEthernet, f, ts); err != nil {
					return err
				}
				if stamper.lastTrade.IsZero() {
					return errors.New("frame delivered no trade")
				}
				s.lat = append(s.lat, stamper.lastTrade.Sub(t0))
				return nil
			})
			s.allocs = mallocs() - m0
			s.ops = int64(len(s.lat))
			if errors.Is(err, errFull) {
				err = nil
			}
			return s, err
		},
		close: func() {
			rig.close()
			<-readerDone
			fdRing.Close()
			fdMem.Close()
		},
	}, nil
}

// loopTrades is a feed.Handler that reports each trade to a latencyLoop.
type loopTrades struct {
	feed.HandlerFuncs
	l *latencyLoop
}

func (t *loopTrades) Trade(*sse.Trade, feed.Meta) { t.l.got() }
