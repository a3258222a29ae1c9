package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"slices"
	"time"
)

// Directions of improvement, the "better" field of a Result.
const (
	lower  = "lower"
	higher = "higher"
)

// params scale every measure. The full run, -quick and the tests differ
// only here.
type params struct {
	rounds   int           // samples per side, interleaved tickwire, baseline, tickwire, ...
	dur      time.Duration // length of one timed sample
	conns    int           // connections of tcp_10k_conns' tickwire side
	fewConns int           // connections of its baseline side
	udpPorts int           // listeners of udp_listen_64k (65,535: every port)
}

var (
	fullParams  = params{rounds: 5, dur: time.Second, conns: 10000, fewConns: 100, udpPorts: allUDPPorts}
	quickParams = params{rounds: 5, dur: 200 * time.Millisecond, conns: 10000, fewConns: 100, udpPorts: allUDPPorts}
)

// sample is what one side of a measure reports for one round.
type sample struct {
	value  float64         // the rate, or nothing for latency measures (computed from lat)
	lat    []time.Duration // round-trip or delivery times, latency measures only
	ops    int64           // operations timed, for allocations per op
	allocs uint64          // heap allocations made during the timed loop
}

// pair runs the two sides of a measure; close releases what setup built.
type pair struct {
	tickwire, baseline func() (sample, error)
	close              func()
}

// measure describes one row of the report.
type measure struct {
	name         string
	unit         string // of Tickwire and Baseline (latency: microseconds)
	better       string // lower or higher
	baselineName string
	latency      bool // samples are latencies: report p50, p99, p99.9
	quick        bool // part of -quick
	doc          string
	// setup builds both sides; errSkip (wrapped) marks a measure that
	// cannot run here, such as one needing root.
	setup func(p params) (*pair, error)
}

// errSkip wraps the reason a measure is skipped.
var errSkip = errors.New("skipped")

// Result is one row of the report. The JSON field names are fixed by the
// bench issue (#5): later runs are compared against them.
type Result struct {
	Name         string   `json:"name"`
	Unit         string   `json:"unit"`
	Better       string   `json:"better"`
	Tickwire     float64  `json:"tickwire"`
	Baseline     float64  `json:"baseline"`
	BaselineName string   `json:"baseline_name"`
	Ratio        float64  `json:"ratio"`
	P50          *float64 `json:"p50,omitempty"`
	P99          *float64 `json:"p99,omitempty"`
	P999         *float64 `json:"p999,omitempty"`
	AllocsPerOp  float64  `json:"allocs_per_op"`

	// For the Markdown table and the plots only.
	baseP50, baseP99, baseP999 float64
	tickwireLat, baselineLat   []time.Duration // pooled over rounds
	skipped                    string          // reason, when the measure did not run
}

// selectMeasures returns the measures matching only (all when nil), the
// quick ones when quick is set.
func selectMeasures(all []measure, only *regexp.Regexp, quick bool) []measure {
	var out []measure
	for _, m := range all {
		if quick && !m.quick {
			continue
		}
		if only != nil && !only.MatchString(m.name) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// run measures m: p.rounds rounds, each running the tickwire side then the
// baseline side, so that drift of a shared, noisy machine hits both.
func run(m measure, p params, progress func(string)) (Result, error) {
	r := Result{Name: m.name, Unit: m.unit, Better: m.better, BaselineName: m.baselineName}
	pr, err := m.setup(p)
	if err != nil {
		if errors.Is(err, errSkip) {
			r.skipped = err.Error()
			return r, nil
		}
		return r, fmt.Errorf("%s: setup: %w", m.name, err)
	}
	defer pr.close()
	var tw, base []sample
	for i := 0; i < p.rounds; i++ {
		progress(fmt.Sprintf("%s round %d/%d", m.name, i+1, p.rounds))
		s, err := pr.tickwire()
		if err != nil {
			return r, fmt.Errorf("%s: tickwire: %w", m.name, err)
		}
		tw = append(tw, s)
		s, err = pr.baseline()
		if err != nil {
			return r, fmt.Errorf("%s: baseline: %w", m.name, err)
		}
		base = append(base, s)
	}
	summarize(&r, m.latency, tw, base)
	return r, nil
}

// summarize fills r from the rounds: medians over rounds of each round's
// figure (its rate, or its p50, p99 and p99.9), allocations over all
// tickwire rounds.
func summarize(r *Result, latency bool, tw, base []sample) {
	var ops int64
	var allocs uint64
	for _, s := range tw {
		ops += s.ops
		allocs += s.allocs
	}
	if ops > 0 {
		r.AllocsPerOp = float64(allocs) / float64(ops)
	}
	if !latency {
		r.Tickwire = median(values(tw))
		r.Baseline = median(values(base))
	} else {
		p50, p99, p999 := roundPercentiles(tw)
		r.P50, r.P99, r.P999 = &p50, &p99, &p999
		r.Tickwire = p50
		r.baseP50, r.baseP99, r.baseP999 = roundPercentiles(base)
		r.Baseline = r.baseP50
		r.tickwireLat = pool(tw)
		r.baselineLat = pool(base)
	}
	if r.Baseline != 0 {
		r.Ratio = r.Tickwire / r.Baseline
	}
}

func values(ss []sample) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.value
	}
	return v
}

// roundPercentiles returns the medians over rounds of each round's p50,
// p99 and p99.9, in microseconds.
func roundPercentiles(ss []sample) (p50, p99, p999 float64) {
	var a, b, c []float64
	for _, s := range ss {
		sorted := slices.Clone(s.lat)
		slices.Sort(sorted)
		a = append(a, micros(percentile(sorted, 0.50)))
		b = append(b, micros(percentile(sorted, 0.99)))
		c = append(c, micros(percentile(sorted, 0.999)))
	}
	return median(a), median(b), median(c)
}

func pool(ss []sample) []time.Duration {
	var all []time.Duration
	for _, s := range ss {
		all = append(all, s.lat...)
	}
	slices.Sort(all)
	return all
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// median of v (the mean of the middle two for an even count); 0 when empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mallocs returns the number of heap allocations so far. It stops the
// world, so call it outside timed loops only.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// maxLatencySamples bounds the samples one latency round keeps (8 bytes
// each): a round stops early when it is full.
const maxLatencySamples = 1 << 20

// timeOps runs op, untimed warmup times first, then repeatedly for dur,
// recording each call's duration when lat is true. It counts the heap
// allocations of the timed calls.
func timeOps(dur time.Duration, warmup int, lat bool, op func() error) (sample, error) {
	for range warmup {
		if err := op(); err != nil {
			return sample{}, err
		}
	}
	var s sample
	if lat {
		s.lat = make([]time.Duration, 0, min(maxLatencySamples, max(1024, int(dur/time.Microsecond))))
	}
	m0 := mallocs()
	start := time.Now()
	deadline := start.Add(dur)
	for {
		t0 := time.Now()
		if err := op(); err != nil {
			return s, err
		}
		t1 := time.Now()
		s.ops++
		if lat {
			if len(s.lat) == cap(s.lat) {
				break
			}
			s.lat = append(s.lat, t1.Sub(t0))
		}
		if t1.After(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	s.allocs = mallocs() - m0
	s.value = float64(s.ops) / elapsed.Seconds()
	return s, nil
}
