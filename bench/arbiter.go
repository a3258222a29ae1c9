package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tickwire/tickwire/arb"
)

// ---- arbiter_ns ----

// arbSeqs is the number of sequence numbers in one pass of arbiter_ns: the
// datagrams of a pass (about 8,000, 60 bytes each) stay in the L2 cache.
const arbSeqs = 4096

// arbFeed returns two lines of MoldUDP64 packets, one 32-byte message each,
// each line losing 1% (never both the same packet), interleaved as they
// arrive: per sequence number A's copy, then B's.
func arbFeed() (lines []int, pkts [][]byte) {
	rng := rand.New(rand.NewPCG(18, 1))
	msg := []byte("0123456789abcdef0123456789abcdef")
	for i := 1; i <= arbSeqs; i++ {
		p := arb.AppendMold(nil, "BENCH", uint64(i), 0, msg)
		lossA, lossB := rng.IntN(100) == 0, rng.IntN(100) == 0
		if lossA && lossB {
			lossB = false
		}
		if !lossA {
			lines, pkts = append(lines, 0), append(pkts, p)
		}
		if !lossB {
			lines, pkts = append(lines, 1), append(pkts, p)
		}
	}
	return lines, pkts
}

// arbCounter counts what the arbiter delivers.
type arbCounter struct{ msgs, bytes, gaps int64 }

func (h *arbCounter) Message(m *arb.Message) { h.msgs++; h.bytes += int64(len(m.Data)) }
func (h *arbCounter) Gap(arb.Gap)            { h.gaps++ }

func setupArbiter(p params) (*pair, error) {
	lines, pkts := arbFeed()
	h := &arbCounter{}
	a, err := arb.New(arb.Config{}, h)
	if err != nil {
		return nil, err
	}
	// run times passes over the feed with fn per datagram and reports ns
	// per datagram.
	run := func(fn func(i int)) sample {
		m0 := mallocs()
		var timed time.Duration
		var ops int64
		for timed < p.dur {
			start := time.Now()
			for i := range pkts {
				fn(i)
			}
			timed += time.Since(start)
			ops += int64(len(pkts))
		}
		return sample{ops: ops, allocs: mallocs() - m0, value: float64(timed.Nanoseconds()) / float64(ops)}
	}
	var sink [2048]byte
	var copied int
	return &pair{
		tickwire: func() (sample, error) {
			before := h.msgs
			passes := int64(0)
			s := run(func(i int) {
				if i == 0 {
					a.Reset() // every pass is a new session from sequence 1
					passes++
				}
				a.Datagram(lines[i], pkts[i], int64(i))
			})
			a.End(int64(len(pkts)))
			if got := h.msgs - before; got != passes*arbSeqs || h.gaps != 0 {
				return sample{}, fmt.Errorf("delivered %d messages and %d gaps in %d passes, want %d and 0", got, h.gaps, passes, passes*arbSeqs)
			}
			return s, nil
		},
		baseline: func() (sample, error) {
			return run(func(i int) { copied += copy(sink[:], pkts[i]) }), nil
		},
		close: func() {},
	}, nil
}
