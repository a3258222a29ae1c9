package arb_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tickwire/tickwire/arb"
)

// arrival is one copy of a packet on one line.
type arrival struct {
	t    int64
	line int
	p    []byte
}

// genCase builds a random feed of n messages in packets of 1 to 3
// messages, sent on two lines with random loss, delay, jitter (reordering)
// and duplication per line, and an end of session that line A always
// delivers last. It returns the arrivals in time order and, per sequence
// number, whether some line carries it.
func genCase(rng *rand.Rand, maxDelay int64) (arr []arrival, present []bool, n int) {
	n = 1 + rng.IntN(60)
	present = make([]bool, n+2)
	var loss [2]int
	var delay [2]int64
	for l := range loss {
		loss[l] = rng.IntN(60) // percent
		delay[l] = rng.Int64N(maxDelay)
	}
	t := int64(0)
	for seq := 1; seq <= n; {
		k := min(1+rng.IntN(3), n+1-seq)
		msgs := make([][]byte, k)
		for i := range msgs {
			msgs[i] = fmt.Appendf(nil, "m%d", seq+i)
		}
		p := arb.AppendMold(nil, "PROP", uint64(seq), 0, msgs...)
		for l := 0; l < 2; l++ {
			copies := 1
			if rng.IntN(10) == 0 {
				copies = 2
			}
			for c := 0; c < copies; c++ {
				if rng.IntN(100) < loss[l] {
					continue
				}
				for i := 0; i < k; i++ {
					present[seq+i] = true
				}
				jitter := rng.Int64N(maxDelay/4 + 1)
				arr = append(arr, arrival{t: t + delay[l] + jitter, line: l, p: p})
			}
		}
		seq += k
		t += 1 + rng.Int64N(maxDelay/8+1)
	}
	slices.SortStableFunc(arr, func(x, y arrival) int { return int(x.t - y.t) })
	end := arb.AppendMold(nil, "PROP", uint64(n+1), arb.MoldEndOfSession)
	last := int64(0)
	if len(arr) > 0 {
		last = arr[len(arr)-1].t
	}
	arr = append(arr, arrival{t: last, line: 0, p: end})
	return arr, present, n
}

// check runs one case and verifies the invariants that hold whatever the
// timeout and window: every number 1..n is delivered or declared lost,
// exactly once and in order; a delivered message carries its own bytes and
// was present on a line; a number present on no line is declared lost.
// With exact set, the timeout and window exceed every delay, so every
// number present on a line must also be delivered.
func check(t *testing.T, cfg arb.Config, arr []arrival, present []bool, n int, exact bool) {
	var r recorder
	a, err := arb.New(cfg, &r)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range arr {
		if err := a.Datagram(x.line, x.p, x.t); err != nil {
			t.Fatal(err)
		}
	}
	a.End(arr[len(arr)-1].t + 1)
	next := uint64(1)
	mi, gi := 0, 0
	for next <= uint64(n) {
		switch {
		case mi < len(r.msgs) && r.msgs[mi].Seq == next:
			m := r.msgs[mi]
			if string(m.Data) != fmt.Sprintf("m%d", next) {
				t.Fatalf("seq %d carries %q", next, m.Data)
			}
			if !present[next] {
				t.Fatalf("seq %d delivered but on no line", next)
			}
			mi++
			next++
		case gi < len(r.gaps) && r.gaps[gi].From == next:
			g := r.gaps[gi]
			if g.To < g.From || g.To > uint64(n) {
				t.Fatalf("bad gap %+v (n %d)", g, n)
			}
			for s := g.From; s <= g.To; s++ {
				if exact && present[s] {
					t.Fatalf("seq %d present but declared lost in %+v", s, g)
				}
			}
			gi++
			next = g.To + 1
		default:
			t.Fatalf("seq %d neither delivered nor lost; events %q", next, r.events())
		}
	}
	if mi != len(r.msgs) || gi != len(r.gaps) {
		t.Fatalf("extra output after seq %d: %q", n, r.events())
	}
	st := a.Stats()
	if st.Pending != 0 || st.Delivered != uint64(len(r.msgs)) {
		t.Fatalf("stats %+v", st)
	}
	var units, acc uint64
	for l := 0; l < 2; l++ {
		ls := a.LineStats(l)
		units += ls.Units
		acc += ls.Wins + ls.Duplicates + ls.Late + ls.Stale + ls.TooLarge
	}
	if units != acc {
		t.Fatalf("line stats do not account for every unit: %d units, %d counted", units, acc)
	}
}

func TestArbiterProperty(t *testing.T) {
	cases := 100_000
	if testing.Short() || raceEnabled {
		cases = 10_000
	}
	rng := rand.New(rand.NewPCG(18, 2026))
	for i := 0; i < cases; i++ {
		const maxDelay = int64(10 * time.Millisecond)
		arr, present, n := genCase(rng, maxDelay)
		if i%2 == 0 {
			// Timeout and window longer than any delay: exact delivery.
			check(t, arb.Config{GapTimeout: time.Second, Window: 256, SlotSize: 8}, arr, present, n, true)
		} else {
			// Short timeouts, tiny windows and slots: gaps declared early.
			cfg := arb.Config{
				GapTimeout: time.Duration(1 + rng.Int64N(maxDelay)),
				Window:     1 << rng.IntN(6),
				SlotSize:   1 + rng.IntN(4),
			}
			check(t, cfg, arr, present, n, false)
		}
	}
}
