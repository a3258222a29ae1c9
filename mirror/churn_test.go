package mirror_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tickwire/tickwire/mirror"
)

// TestFlowChurn drives many short connections through a small flow table:
// connections open, send, close, get evicted and come back, across 64 port
// pairs and a table of 32 directions. Each connection's bytes are checked
// against what it sent, so a lookup that found the wrong flow would show;
// some bytes are lost, so holes time out or end with their flows.
func TestFlowChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	rec := newRecorder(t)
	rec.quiet = true
	a, err := mirror.New(mirror.Config{MaxFlows: 32, BufferPerFlow: 4096, HoleTimeout: time.Millisecond}, rec)
	if err != nil {
		t.Fatal(err)
	}
	type conn struct {
		isn  uint32
		sent int
		open bool
	}
	conns := make([]conn, 64)
	ts := int64(0)
	for step := 0; step < 20000; step++ {
		i := rng.IntN(len(conns))
		c := &conns[i]
		s := ab(0, 0, "")
		s.sport = uint16(1000 + i)
		switch {
		case !c.open:
			c.isn, c.sent, c.open = rng.Uint32(), 0, true
			s.seq, s.flags = c.isn, fSYN
		case rng.IntN(20) == 0:
			s.seq, s.flags = c.isn+1+uint32(c.sent), fFIN|fACK
			c.open = false
		default:
			n := 1 + rng.IntN(100)
			data := make([]byte, n)
			for j := range data {
				data[j] = byte(i) // every byte of connection i is i
			}
			if rng.IntN(10) == 0 {
				c.sent += 1 + rng.IntN(50) // lost bytes: a hole, skipped later
			}
			s.seq, s.flags, s.data = c.isn+1+uint32(c.sent), fACK, string(data)
			c.sent += n
		}
		ts += int64(rng.IntN(400_000)) // holes time out (1 ms) or end with their flow
		if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	st := a.Stats()
	if st.Evictions == 0 || st.ActiveFlows != 0 || st.TimeoutSkips == 0 || st.EndSkips == 0 {
		t.Fatalf("stats %+v", st)
	}
	for k, s := range rec.streams {
		for _, b := range s.data {
			if int(b) != int(k.SrcPort)-1000 {
				t.Fatalf("%v received a byte of connection %d", k, b)
			}
		}
		if s.starts != len(s.ends) {
			t.Fatalf("%v: %d starts, %d ends", k, s.starts, len(s.ends))
		}
	}
}

// TestChurnDoesNotAllocate: starting, ending and evicting flows reuses the
// pooled flow state and buffers.
func TestChurnDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	a, err := mirror.New(mirror.Config{MaxFlows: 4, History: true}, &nopHandler{})
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for port := uint16(1); port <= 16; port++ {
		for _, s := range []seg{ab(100, fSYN, ""), ab(105, 0, "later"), ab(101, 0, "abcd"), ab(110, fFIN, "")} {
			s.sport = port
			frames = append(frames, ethernet(appendIPv4(nil, s)))
		}
	}
	i := 0
	step := func() {
		_ = a.HandleFrame(frames[i%len(frames)], int64(i))
		i++
	}
	for range 2 * len(frames) {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per frame", n)
	}
}
