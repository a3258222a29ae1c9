package arb_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/arb"
)

// recorder is a Handler that keeps everything it gets, in order.
type recorder struct {
	msgs  []arb.Message
	gaps  []arb.Gap
	order []bool // true: the next message, false: the next gap
}

// events formats what the recorder got, in order.
func (r *recorder) events() []string {
	var ev []string
	mi, gi := 0, 0
	for _, isMsg := range r.order {
		if isMsg {
			m := r.msgs[mi]
			ev = append(ev, fmt.Sprintf("%d:%s@%d", m.Seq, m.Data, m.Line))
			mi++
		} else {
			g := r.gaps[gi]
			ev = append(ev, fmt.Sprintf("gap %d-%d %v", g.From, g.To, g.Reason))
			gi++
		}
	}
	return ev
}

func (r *recorder) Message(m *arb.Message) {
	c := *m
	c.Data = slices.Clone(m.Data)
	r.msgs = append(r.msgs, c)
	r.order = append(r.order, true)
}

func (r *recorder) Gap(g arb.Gap) {
	r.gaps = append(r.gaps, g)
	r.order = append(r.order, false)
}

func mold(seq uint64, msgs ...string) []byte {
	b := make([][]byte, len(msgs))
	for i, m := range msgs {
		b[i] = []byte(m)
	}
	return arb.AppendMold(nil, "S1", seq, 0, b...)
}

type step struct {
	line int
	p    []byte
	t    time.Duration
	tick bool // Tick(t) instead of a datagram
	end  bool // End(t)
}

func TestArbiterTable(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		steps []step
		want  []string
	}{{
		name: "in order on A, B duplicates",
		steps: []step{
			{0, mold(1, "a", "b"), 0, false, false},
			{1, mold(1, "a", "b"), 1, false, false},
			{1, mold(3, "c"), 2, false, false},
			{0, mold(3, "c"), 3, false, false},
		},
		want: []string{"1:a@0", "2:b@0", "3:c@1"},
	}, {
		name: "B fills A's hole before the timeout",
		steps: []step{
			{0, mold(1, "a"), 0, false, false},
			{0, mold(3, "c"), 1 * ms, false, false},
			{1, mold(2, "b"), 50 * ms, false, false},
		},
		want: []string{"1:a@0", "2:b@1", "3:c@0"},
	}, {
		name: "late fill after the timeout is not delivered",
		steps: []step{
			{0, mold(1, "a"), 0, false, false},
			{0, mold(3, "c"), 1 * ms, false, false},
			{0, nil, 200 * ms, true, false},
			{1, mold(2, "b"), 201 * ms, false, false},
			{1, mold(4, "d"), 202 * ms, false, false},
		},
		want: []string{"1:a@0", "gap 2-2 timeout", "3:c@0", "4:d@1"},
	}, {
		name: "loss at the start is a gap from 1",
		steps: []step{
			{0, mold(3, "c"), 0, false, false},
			{1, mold(4, "d"), 1 * ms, false, false},
			{0, nil, 2 * ms, false, true},
		},
		want: []string{"gap 1-2 end", "3:c@0", "4:d@1"},
	}, {
		name: "heartbeat reveals a trailing gap",
		steps: []step{
			{0, mold(1, "a"), 0, false, false},
			{1, arb.AppendMold(nil, "S1", 4, 0), 1 * ms, false, false},
			{0, nil, 102 * ms, true, false},
		},
		want: []string{"1:a@0", "gap 2-3 timeout"},
	}, {
		name: "window overflow declares early",
		steps: []step{
			{0, mold(1, "a"), 0, false, false},
			{0, mold(3, "c"), 0, false, false},
			{0, mold(9, "i"), 0, false, false},
			{0, mold(2, "b"), 0, false, false},
		},
		want: []string{"1:a@0", "gap 2-2 window", "3:c@0", "gap 4-5 window"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			a, err := arb.New(arb.Config{Window: 4}, &r)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.steps {
				switch {
				case s.tick:
					a.Tick(int64(s.t))
				case s.end:
					a.End(int64(s.t))
				default:
					if err := a.Datagram(s.line, s.p, int64(s.t)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !reflect.DeepEqual(r.events(), tt.want) {
				t.Errorf("got  %q\nwant %q", r.events(), tt.want)
			}
		})
	}
}

func TestArbiterStats(t *testing.T) {
	var r recorder
	a, err := arb.New(arb.Config{}, &r)
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(time.Millisecond)
	a.Datagram(0, mold(1, "a"), 0)
	a.Datagram(1, mold(1, "a"), 3*ms)
	a.Datagram(1, mold(2, "b"), 4*ms)
	a.Datagram(0, mold(2, "b"), 5*ms)
	a.Datagram(0, mold(4, "d"), 6*ms)
	a.End(7 * ms)
	a.Datagram(1, mold(3, "c"), 8*ms)
	if err := a.Datagram(0, []byte("short"), 9*ms); err == nil {
		t.Error("short packet accepted")
	}
	if err := a.Datagram(1, arb.AppendMold(nil, "S2", 1, 0, []byte("x")), 10*ms); err == nil {
		t.Error("other session accepted")
	}
	if err := a.Datagram(2, mold(5, "e"), 0); err != arb.ErrLine {
		t.Errorf("line 2: %v", err)
	}
	la, lb := a.LineStats(0), a.LineStats(1)
	if la.Wins != 2 || la.Duplicates != 1 || la.BehindSum != ms || la.Malformed != 1 {
		t.Errorf("line A %+v", la)
	}
	if lb.Wins != 1 || lb.Duplicates != 1 || lb.BehindMax != 3*ms || lb.Late != 1 || lb.Sessions != 1 {
		t.Errorf("line B %+v", lb)
	}
	st := a.Stats()
	if st.Delivered != 3 || st.Gaps != 1 || st.Lost != 1 || st.Next != 5 || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestArbiterSessions(t *testing.T) {
	var r recorder
	a, _ := arb.New(arb.Config{}, &r)
	a.Datagram(0, arb.AppendMold(nil, "S1", 1, 0, []byte("a")), 0)
	a.Datagram(0, arb.AppendMold(nil, "S1", 3, 0, []byte("c")), 0)
	a.Datagram(0, arb.AppendMold(nil, "S1", 4, arb.MoldEndOfSession), 0)
	if a.Ended() {
		t.Error("Ended with message 2 still awaited")
	}
	a.Datagram(1, arb.AppendMold(nil, "S2", 1, 0, []byte("x")), 0)
	if a.Ended() {
		t.Error("Ended right after a new session started")
	}
	a.Datagram(1, arb.AppendMold(nil, "S2", 2, arb.MoldEndOfSession), 0)
	if !a.Ended() {
		t.Error("not Ended after the end of session S2")
	}
	want := []string{"1:a@0", "gap 2-2 end", "3:c@0", "1:x@1"}
	if !reflect.DeepEqual(r.events(), want) {
		t.Errorf("got %q, want %q", r.events(), want)
	}
	if s, _ := a.Session(); strings.TrimRight(string(s[:]), " ") != "S2" {
		t.Errorf("session %q", s)
	}
}

func TestArbiterSequenceFunc(t *testing.T) {
	var r recorder
	a, err := arb.New(arb.Config{Lines: 3, Sequence: func(p []byte) (uint64, bool) {
		if len(p) < 8 {
			return 0, false
		}
		return binary.BigEndian.Uint64(p), true
	}}, &r)
	if err != nil {
		t.Fatal(err)
	}
	d := func(seq uint64, s string) []byte { return append(binary.BigEndian.AppendUint64(nil, seq), s...) }
	a.Datagram(2, d(2, "b"), 0)
	a.Datagram(1, d(1, "a"), 0)
	if err := a.Datagram(0, []byte{1}, 0); err != arb.ErrSequence {
		t.Errorf("short datagram: %v", err)
	}
	if len(r.msgs) != 2 || string(r.msgs[1].Data[8:]) != "b" || r.msgs[1].Line != 2 {
		t.Errorf("got %q", r.events())
	}
}

func TestNewErrors(t *testing.T) {
	h := &recorder{}
	for _, c := range []arb.Config{{Lines: -1}, {Lines: arb.MaxLines + 1}, {GapTimeout: -1}, {Window: 3},
		{Window: arb.MaxWindow * 2}, {SlotSize: -1}, {SlotSize: arb.MaxSlotSize + 1}, {First: 1<<64 - 1}} {
		if _, err := arb.New(c, h); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
	if _, err := arb.New(arb.Config{}, nil); err == nil {
		t.Error("nil handler accepted")
	}
}

type nopHandler struct{ n, gaps uint64 }

func (h *nopHandler) Message(m *arb.Message) { h.n += uint64(len(m.Data)) }
func (h *nopHandler) Gap(g arb.Gap)          { h.gaps++ }

// feed2 builds two lines of packets of one message each, each losing 1%
// (never both), and returns them interleaved as they would arrive.
func feed2(n int, seed uint64) (lines []int, pkts [][]byte) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 1; i <= n; i++ {
		p := arb.AppendMold(nil, "BENCH", uint64(i), 0, []byte("0123456789abcdef0123456789abcdef"))
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

func TestArbiterAllocs(t *testing.T) {
	h := &nopHandler{}
	a, _ := arb.New(arb.Config{}, h)
	lines, pkts := feed2(10000, 1)
	i := 0
	allocs := testing.AllocsPerRun(len(pkts)-1, func() {
		a.Datagram(lines[i], pkts[i], int64(i))
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per datagram, want 0", allocs)
	}
	if a.Stats().Delivered == 0 {
		t.Error("nothing delivered")
	}
}
