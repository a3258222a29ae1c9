package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// lockedWriter serialises the queues' writes to the shared output; each
// write is whole records (pipeline.emit).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// queueConfig is the feed decoder configuration of one of n queues sharing
// b: -max-flows and the reassembly share of -buffer-total are b's, shared
// by the queues (any one may use all of them: RSS need not spread the flows
// evenly); the STEP share is split equally, each at least four STEP
// messages of the default size.
func (o options) queueConfig(n int, b *mirror.Budget) feed.Config {
	c := o.feedConfig()
	c.MaxFlows = o.maxFlows
	c.Budget = b
	c.BufferTotal = max(o.bufferTotal/int64(n), 4*step.DefaultMaxMessageSize)
	return c
}

// processQueues is process for -link dmaring -queues N > 1: one reader
// goroutine, feed decoder and pipeline per RX queue, no lock shared between
// queues but the output's, which takes whole records. The summary sums the
// queues' counters. It returns run's exit status.
func processQueues(ctx context.Context, o options, ring *ringSource, stdout, stderr io.Writer) int {
	out := bufio.NewWriterSize(stdout, 64<<10)
	summaryTo := io.Writer(out)
	if o.format != "text" {
		summaryTo = stderr
	}
	shared := &lockedWriter{w: out}
	n := o.queues
	type queue struct {
		p       *pipeline
		d       *feed.Decoder
		readErr error
	}
	budget, err := mirror.NewBudget(o.maxFlows, o.bufferTotal-int64(o.stepBudget))
	if err != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
		return 2
	}
	qs := make([]queue, n)
	for i := range qs {
		p := newPipeline(o, bufio.NewWriterSize(shared, 64<<10))
		d, err := feed.New(o.queueConfig(n, budget), p.handler())
		if err != nil {
			fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
			return 2
		}
		qs[i] = queue{p: p, d: d}
	}
	qs[0].p.printHeader()
	qs[0].p.out.Flush()

	start := time.Now()
	var wg sync.WaitGroup
	for i := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := &qs[i]
			q.readErr = pumpQueue(ctx, ring.queue(i), &queueClock{times: ring.times}, q.d)
			if q.readErr != nil {
				ring.ep.Close() // the other queues end too
			}
			q.d.Close()
			q.p.finish()
			q.p.out.Flush()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var st feed.Stats
	var offloaded []mirror.FlowKey
	var readErr, rawErr error
	for _, q := range qs {
		addCounters(reflect.ValueOf(&st).Elem(), reflect.ValueOf(q.d.Stats()))
		offloaded = append(offloaded, q.d.OffloadedFlows()...)
		readErr = errors.Join(readErr, q.readErr)
		rawErr = errors.Join(rawErr, q.p.rawErr)
	}
	sort.Slice(offloaded, func(i, j int) bool { return offloaded[i].String() < offloaded[j].String() })
	fmt.Fprintln(summaryTo, qs[0].p.summary(st, offloaded, elapsed))
	flushErr := out.Flush()
	if readErr != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", readErr)
		return 1
	}
	if err := errors.Join(rawErr, flushErr); err != nil {
		fmt.Fprintf(stderr, "mirrorfeed: %v\n", err)
		return 1
	}
	return 0
}

// addCounters adds the counters of v to those of sum, field by field:
// both are the same struct type whose fields are uint64 counters or
// structs of them (feed.Stats, mirror.Stats). A field of another kind is
// a programming error: the summary would drop it silently, so it panics.
func addCounters(sum, v reflect.Value) {
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Uint64:
			sum.Field(i).SetUint(sum.Field(i).Uint() + f.Uint())
		case reflect.Struct:
			addCounters(sum.Field(i), f)
		default:
			panic(fmt.Sprintf("mirrorfeed: cannot sum %s field %s of kind %s", v.Type(), v.Type().Field(i).Name, f.Kind()))
		}
	}
}

// captureTimes is the capture's clock for -queues N: the capture time of
// every frame that advances mirror's clock, in capture order, appended by
// the replay's goroutine as it reads the capture. Each queue's decoder
// sees only its own flows' frames, so on its own its clock would reach a
// hole's timeout later than the direct path's, which advances with every
// frame, and report the gap with a later time; a queue flushes its
// decoder with the capture's times that lie before its next frame
// (queueClock), so holes time out at the frame they would time out at on
// one queue. That is exact when the capture's times do not go backwards,
// as a capture's normally do.
type captureTimes struct {
	mu sync.Mutex
	// ts only grows; entries are never rewritten.
	// +checklocks:mu
	ts []int64
}

// snapshot returns the times recorded so far. The slice is shared: its
// elements are never written again.
func (c *captureTimes) snapshot() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ts
}

// timedSource records the capture time of each frame it reads that
// advances mirror's clock: every frame of a link type other than Ethernet
// (the NIC drops those, the direct path decodes them), and Ethernet frames
// carrying IPv4 behind at most two VLAN tags, as mirror decodes them.
type timedSource struct {
	frame.Source
	times *captureTimes
}

// ReadFrames implements frame.Source.
func (s *timedSource) ReadFrames(frames []frame.Frame) (int, error) {
	n, err := s.Source.ReadFrames(frames)
	s.times.mu.Lock()
	for i := range frames[:n] {
		if advancesClock(&frames[i]) {
			s.times.ts = append(s.times.ts, frames[i].Time)
		}
	}
	s.times.mu.Unlock()
	return n, err
}

// advancesClock reports whether f makes mirror advance its capture clock
// (mirror.Assembler.HandleLinkFrame reaches its IPv4 code).
func advancesClock(f *frame.Frame) bool {
	if f.LinkType != frame.LinkTypeEthernet && f.LinkType != 0 {
		return true
	}
	b := f.Data()
	for range 3 {
		if len(b) < 14 {
			return false
		}
		switch et := uint16(b[12])<<8 | uint16(b[13]); et {
		case 0x0800:
			return true
		case 0x8100, 0x88a8:
			b = b[4:] // one tag: the EtherType moves 4 bytes on
		default:
			return false
		}
	}
	return false
}

// queueClock is one queue's position in the capture's clock.
type queueClock struct {
	times *captureTimes
	next  int // index of the first time not yet flushed
}

// catchUp flushes d with every capture time before ts not yet flushed.
func (c *queueClock) catchUp(d *feed.Decoder, ts int64) {
	all := c.times.snapshot()
	for ; c.next < len(all) && all[c.next] < ts; c.next++ {
		d.Flush(all[c.next])
	}
}

// pumpQueue is pump for one queue of -queues N: frames from src go into d,
// each after d has been flushed with the capture's earlier times, until
// io.EOF, where d is flushed with the rest. It shows no progress line.
func pumpQueue(ctx context.Context, src frame.Source, c *queueClock, d *feed.Decoder) error {
	batch := frame.NewBatch(batchFrames, slotSize)
	var frames uint64
	for {
		n, err := src.ReadFrames(batch)
		for i := range batch[:n] {
			f := &batch[i]
			c.catchUp(d, f.Time)
			d.HandleSourceFrame(f) // per-frame errors are counted in d.Stats
		}
		frames += uint64(n)
		switch {
		case errors.Is(err, io.EOF):
			c.catchUp(d, math.MaxInt64)
			return nil
		case err != nil:
			return describeReadError(err, frames)
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted after %d frames", frames)
		}
	}
}
