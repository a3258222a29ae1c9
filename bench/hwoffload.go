package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
)

// hwMessages is the size of the feed the hwoffload measures replay; its
// records (about 6500) fit the rings of hwRingLog2.
const (
	hwMessages = 2000
	hwRingLog2 = 16
)

// hwWait bounds a twin run in a bench round.
const hwWait = 2 * time.Minute

// runTwin starts a twin on f with rings big enough for every record and
// opens it; stop closes both.
func runTwin(f *capgen.Feed) (dev *hwoffload.Device, stop func(), err error) {
	tw, err := twin.New(twin.Config{Input: f.Source(), RingLog2: hwRingLog2})
	if err != nil {
		return nil, nil, err
	}
	m, err := tw.Region().Map()
	if err != nil {
		tw.Close()
		return nil, nil, err
	}
	dev, err = hwoffload.OpenRegion(context.Background(), m)
	if err != nil {
		m.Close()
		tw.Close()
		return nil, nil, err
	}
	return dev, func() { dev.Close(); tw.Close() }, nil
}

func hwFeed() (*capgen.Feed, int, error) {
	f, err := capgen.Generate(capgen.Options{Messages: hwMessages, Seed: 1})
	if err != nil {
		return nil, 0, err
	}
	return f, len(f.Records), nil
}

// ---- hwoffload_twin_latency ----

// latencyHandler records, per trade or order, the time since the frame
// being handled was handed in.
type latencyHandler struct {
	feed.HandlerFuncs
	t0  time.Time
	lat []time.Duration
}

func (h *latencyHandler) Trade(*sse.Trade, feed.Meta) { h.lat = append(h.lat, time.Since(h.t0)) }
func (h *latencyHandler) Order(*sse.Order, feed.Meta) { h.lat = append(h.lat, time.Since(h.t0)) }

var _ feed.Handler = (*latencyHandler)(nil)

func setupTwinLatency(params) (*pair, error) {
	f, records, err := hwFeed()
	if err != nil {
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) {
			dev, stop, err := runTwin(f)
			if err != nil {
				return sample{}, err
			}
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), hwWait)
			defer cancel()
			epoch := int64(dev.Read64(hwoffload.RegCyclesEpochNs))
			rings := [2]*hwoffload.Ring{dev.Ring(hwoffload.RingTrades), dev.Ring(hwoffload.RingOrders)}
			s := sample{lat: make([]time.Duration, 0, records)}
			m0 := mallocs()
			// Set RUN and spin at once: Device.Run would sleep until
			// STATUS.RUNNING, and a sleep of under a millisecond can take
			// one (the runtime's netpoller waits in whole milliseconds),
			// while the twin already writes records.
			dev.Write32(hwoffload.RegControl, hwoffload.ControlRun)
			for {
				done := dev.Status()&hwoffload.StatusInputDone != 0
				got := false
				for _, r := range rings {
					for {
						sl, _, ok := r.Read()
						if !ok {
							break
						}
						got = true
						rx := epoch + int64(hwoffload.CyclesDuration(sl.RxCycles()))
						s.lat = append(s.lat, time.Duration(time.Now().UnixNano()-rx))
					}
				}
				if done && !got {
					break
				}
				if ctx.Err() != nil {
					return s, fmt.Errorf("twin did not finish: %w", ctx.Err())
				}
			}
			s.allocs = mallocs() - m0
			s.ops = int64(len(s.lat))
			if len(s.lat) != records {
				return s, fmt.Errorf("read %d records of %d", len(s.lat), records)
			}
			return s, nil
		},
		baseline: func() (sample, error) {
			h := &latencyHandler{lat: make([]time.Duration, 0, records)}
			dec, err := feed.New(feed.Config{}, h)
			if err != nil {
				return sample{}, err
			}
			m0 := mallocs()
			for _, fr := range f.Frames {
				h.t0 = time.Now()
				dec.HandleFrame(uint16(1), fr.Data, fr.Time) // per-frame errors are counted
			}
			dec.Close()
			s := sample{lat: h.lat, ops: int64(len(h.lat)), allocs: mallocs() - m0}
			if len(h.lat) != records {
				return s, fmt.Errorf("decoded %d records of %d", len(h.lat), records)
			}
			return s, nil
		},
		close: func() {},
	}, nil
}

// ---- hwoffload_ring_read ----

func setupRingRead(p params) (*pair, error) {
	f, records, err := hwFeed()
	if err != nil {
		return nil, err
	}
	// The baseline's records, decoded once.
	var trades []sse.Trade
	var orders []sse.Order
	dec, err := feed.New(feed.Config{}, feed.HandlerFuncs{
		OnTrade: func(t *sse.Trade, _ feed.Meta) { trades = append(trades, *t) },
		OnOrder: func(o *sse.Order, _ feed.Meta) { orders = append(orders, *o) },
	})
	if err != nil {
		return nil, err
	}
	for _, fr := range f.Frames {
		dec.HandleFrame(1, fr.Data, fr.Time)
	}
	dec.Close()
	// passes runs fill (untimed) and read (timed) until dur is spent, at
	// least once and at most 50 times, and returns ns per record.
	passes := func(fill func() (func() int, func(), error)) (sample, error) {
		var s sample
		var timed time.Duration
		for i := 0; i < 50 && (i == 0 || timed < p.dur); i++ {
			read, done, err := fill()
			if err != nil {
				return s, err
			}
			m0 := mallocs()
			t0 := time.Now()
			n := read()
			timed += time.Since(t0)
			s.allocs += mallocs() - m0
			done()
			if n != records {
				return s, fmt.Errorf("read %d records of %d", n, records)
			}
			s.ops += int64(n)
		}
		s.value = float64(timed.Nanoseconds()) / float64(s.ops)
		return s, nil
	}
	var t sse.Trade
	var o sse.Order
	return &pair{
		tickwire: func() (sample, error) {
			return passes(func() (func() int, func(), error) {
				dev, stop, err := runTwin(f)
				if err != nil {
					return nil, nil, err
				}
				ctx, cancel := context.WithTimeout(context.Background(), hwWait)
				defer cancel()
				if err := dev.Run(ctx); err != nil {
					stop()
					return nil, nil, err
				}
				if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
					stop()
					return nil, nil, err
				}
				tr, or := dev.Ring(hwoffload.RingTrades), dev.Ring(hwoffload.RingOrders)
				read := func() int {
					n := 0
					for {
						s, _, ok := tr.Read()
						if !ok || !s.Trade(&t) {
							break
						}
						n++
					}
					for {
						s, _, ok := or.Read()
						if !ok || !s.Order(&o) {
							break
						}
						n++
					}
					return n
				}
				return read, stop, nil
			})
		},
		baseline: func() (sample, error) {
			return passes(func() (func() int, func(), error) {
				tc, oc := make(chan sse.Trade, len(trades)), make(chan sse.Order, len(orders))
				for _, x := range trades {
					tc <- x
				}
				for _, x := range orders {
					oc <- x
				}
				close(tc)
				close(oc)
				read := func() int {
					n := 0
					for t = range tc {
						n++
					}
					for o = range oc {
						n++
					}
					return n
				}
				return read, func() {}, nil
			})
		},
		close: func() {},
	}, nil
}
