package mirror_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tickwire/tickwire/mirror"
)

// holeFlows sends, on n directions (source ports 1..n) one after the other,
// "ab" in order then "ef" after a 2-byte hole, each segment 1 µs after the
// previous one.
func holeFlows(t *testing.T, a *mirror.Assembler, n int) {
	t.Helper()
	ts := int64(0)
	for port := 1; port <= n; port++ {
		for _, s := range []seg{ab(100, fSYN, ""), ab(101, 0, "ab"), ab(105, 0, "ef")} {
			s.sport = uint16(port)
			ts += 1000
			if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBufferTotal: with room for 4 buffers, 20 directions that each hold
// bytes behind a hole take their buffers from each other. The holes of the
// least recently active are skipped and reported as gaps, the held bytes
// delivered: every direction's stream is tiled by its data and gaps.
func TestBufferTotal(t *testing.T) {
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{BufferPerFlow: 1024, MaxBufferTotal: 4096, HoleTimeout: -1}, rec)
	if err != nil {
		t.Fatal(err)
	}
	holeFlows(t, a, 20)
	st := a.Stats()
	if st.BufferTotalSkips != 16 || st.Gaps != 16 || st.GapBytes != 32 {
		t.Fatalf("before Close: %+v", st)
	}
	if held, free := mirror.BufferCounts(a); held != 4 || free != 0 {
		t.Fatalf("%d buffers held, %d free; want 4, 0", held, free)
	}
	// The first 16 directions were skipped, oldest first, each as soon as a
	// later one needed its buffer.
	for port := 1; port <= 20; port++ {
		k := keyAB
		k.SrcPort = uint16(port)
		want := []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`}
		if port > 16 {
			want = want[:2]
		}
		if got := eventsOf(rec, k); !slices.Equal(got, want) {
			t.Fatalf("port %d before Close: %q, want %q", port, got, want)
		}
	}
	a.Close()
	st = a.Stats()
	if st.BufferTotalSkips != 16 || st.EndSkips != 4 || st.Gaps != 20 || st.GapBytes != 40 || st.DeliveredBytes != 80 {
		t.Fatalf("after Close: %+v", st)
	}
	if held, free := mirror.BufferCounts(a); held != 0 || free != 1 {
		t.Fatalf("after Close: %d buffers held, %d free; want 0 and 1 (a quarter of 4)", held, free)
	}
	for port := 1; port <= 20; port++ {
		k := keyAB
		k.SrcPort = uint16(port)
		want := []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`, "end close"}
		if got := eventsOf(rec, k); !slices.Equal(got, want) {
			t.Fatalf("port %d: %q, want %q", port, got, want)
		}
	}
}

// TestBufferGivenBack: a direction whose hole is filled holds nothing, and
// without History gives its buffer back at once; the free list is bounded
// (a quarter of the buffers MaxBufferTotal allows).
func TestBufferGivenBack(t *testing.T) {
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{BufferPerFlow: 1024, MaxBufferTotal: 8 * 1024, HoleTimeout: -1}, rec)
	if err != nil {
		t.Fatal(err)
	}
	holeFlows(t, a, 6)
	if held, free := mirror.BufferCounts(a); held != 6 || free != 0 {
		t.Fatalf("%d buffers held, %d free; want 6, 0", held, free)
	}
	ts := int64(1e6)
	for port := 1; port <= 6; port++ {
		s := ab(103, 0, "cd")
		s.sport = uint16(port)
		if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
			t.Fatal(err)
		}
	}
	if held, free := mirror.BufferCounts(a); held != 0 || free != 2 {
		t.Fatalf("after the holes were filled: %d buffers held, %d free; want 0, 2", held, free)
	}
	a.Close()
	st := a.Stats()
	if st.Gaps != 0 || st.DeliveredBytes != 36 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBufferTotalHistory: with History, a starting direction takes the
// buffer of one that holds only History (forgetting it, nothing is
// skipped), never the buffer of one that holds bytes behind a hole; a
// direction that must hold bytes takes one in any case.
func TestBufferTotalHistory(t *testing.T) {
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{BufferPerFlow: 1024, MaxBufferTotal: 2048, HoleTimeout: -1, History: true}, rec)
	if err != nil {
		t.Fatal(err)
	}
	send := func(port uint16, s seg, ts int64) {
		t.Helper()
		s.sport = port
		if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
			t.Fatal(err)
		}
	}
	send(1, ab(100, fSYN, ""), 1)
	send(1, ab(101, 0, "GOOD"), 2)
	send(2, ab(100, fSYN, ""), 3)
	send(2, ab(101, 0, "GOOD"), 4)
	send(2, ab(107, 0, "held"), 5) // 2 bytes missing before it
	send(3, ab(100, fSYN, ""), 6)  // takes direction 1's History buffer
	send(3, ab(101, 0, "GOOD"), 7)
	send(4, ab(100, fSYN, ""), 8) // no buffer to take: no History
	send(4, ab(101, 0, "GOOD"), 9)
	if st := a.Stats(); st.Gaps != 0 {
		t.Fatalf("a History buffer skipped a hole: %+v", st)
	}
	// Retransmissions with other bytes: only direction 3 still compares.
	for port := uint16(1); port <= 4; port++ {
		send(port, ab(101, 0, "EVIL"), 10)
	}
	if st := a.Stats(); st.OverlapAnomalies != 2 { // directions 2 and 3
		t.Fatalf("%d anomalies, want 2 (directions 2 and 3): %+v", st.OverlapAnomalies, st)
	}
	send(4, ab(109, 0, "late"), 11) // must hold: takes direction 3's History buffer
	if st := a.Stats(); st.Gaps != 0 {
		t.Fatalf("a hole was skipped while a History buffer was there to take: %+v", st)
	}
	send(3, ab(115, 0, "more"), 12) // must hold: takes direction 2's buffer, the least recently active
	st := a.Stats()
	if st.BufferTotalSkips != 1 || st.GapBytes != 2 {
		t.Fatalf("stats %+v", st)
	}
	a.Close()
	k2 := keyAB
	k2.SrcPort = 2
	if got, want := fmt.Sprint(eventsOf(rec, k2)), fmt.Sprint([]string{"start", `data 0 "GOOD"`, "gap 4 2", `data 6 "held"`, "end close"}); got != want {
		t.Fatalf("direction 2: %s, want %s", got, want)
	}
}

func TestBufferTotalConfig(t *testing.T) {
	for _, c := range []struct {
		cfg mirror.Config
		ok  bool
	}{
		{mirror.Config{}, true},
		{mirror.Config{MaxBufferTotal: mirror.DefaultBufferPerFlow}, true},
		{mirror.Config{MaxBufferTotal: mirror.DefaultBufferPerFlow - 1}, false},
		{mirror.Config{MaxBufferTotal: -1}, false},
		{mirror.Config{MaxBufferTotal: mirror.MaxMaxBufferTotal + 1}, false},
		{mirror.Config{BufferPerFlow: mirror.MaxBufferPerFlow}, true}, // the default grows to one buffer
	} {
		_, err := mirror.New(c.cfg, &nopHandler{})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, mirror.ErrConfig)) {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// TestBufferTotalTiles interleaves 40 impaired streams through room for 3
// buffers: every direction's delivered bytes are the stream's bytes at their
// offsets, and its data and gaps tile the stream up to the last delivered
// byte, whichever bound skipped its holes.
func TestBufferTotalTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{BufferPerFlow: 4096, MaxBufferTotal: 3 * 4096, HoleTimeout: -1, History: true}, rec)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	streams := make([][]byte, n)
	segs := make([][]genSeg, n)
	for i := range streams {
		streams[i] = make([]byte, 2000+rng.IntN(20000))
		for j := range streams[i] {
			streams[i][j] = byte(rng.Uint32())
		}
		segs[i] = genStream(rng, streams[i], impairment{loss: 0.05, reorder: 0.3, dup: 0.05, overlap: 0.1}, true, false)
	}
	ts := int64(0)
	for left := true; left; {
		left = false
		for i := range segs {
			if len(segs[i]) == 0 {
				continue
			}
			left = true
			g := segs[i][0]
			segs[i] = segs[i][1:]
			s := ab(1000+uint32(g.off), g.flags, string(g.data))
			if g.flags&fSYN != 0 {
				s = ab(1000-1, fSYN, "")
				s.flags = fSYN
			}
			s.sport = uint16(i + 1)
			ts += 1000
			if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Close()
	st := a.Stats()
	if st.BufferTotalSkips == 0 {
		t.Fatalf("the bound never skipped a hole: %+v", st)
	}
	var delivered, gaps uint64
	for i := range streams {
		k := keyAB
		k.SrcPort = uint16(i + 1)
		s := rec.streams[k]
		for o, ok := range s.delivered {
			if !ok {
				gaps++
				continue
			}
			delivered++
			if s.img[o] != streams[i][o] {
				t.Fatalf("direction %d: byte %d is %#x, want %#x", i+1, o, s.img[o], streams[i][o])
			}
		}
	}
	if st.DeliveredBytes != delivered || st.GapBytes != gaps {
		t.Fatalf("stats %+v; the streams hold %d delivered and %d gap bytes", st, delivered, gaps)
	}
}

// TestBufferTotalEndsWaitingFIN: a direction whose FIN waits for a hole ends
// when the hole is skipped to take its buffer, as it would on its own
// segment.
func TestBufferTotalEndsWaitingFIN(t *testing.T) {
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{BufferPerFlow: 1024, MaxBufferTotal: 1024, HoleTimeout: -1}, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []seg{ab(100, fSYN, ""), ab(101, 0, "ab"), ab(105, fFIN, "ef"), ab(100, fSYN, ""), ab(101, 0, "ab"), ab(105, 0, "ef")} {
		if i >= 3 {
			s.sport = 2
		}
		if err := a.HandleIPv4(appendIPv4(nil, s), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`, "end fin"}
	if got := eventsOf(rec, keyAB); !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}
