package mirror_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/tickwire/tickwire/mirror"
)

// TestBudgetFlows: two Assemblers share a Budget of 4 flow directions. The
// first takes them all; the second, holding none, refuses a new direction
// (counted) until the first closes, while the first, at the Budget's bound,
// evicts its own least recently active direction for a new one.
func TestBudgetFlows(t *testing.T) {
	b, err := mirror.NewBudget(4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Tables of 8: the Budget, not the table, is what is full.
	cfg := mirror.Config{MaxFlows: 8, Budget: b, BufferPerFlow: 1024}
	a1, _ := mirror.New(cfg, newRecorder(t))
	rec2 := newRecorder(t)
	a2, err := mirror.New(cfg, rec2)
	if err != nil {
		t.Fatal(err)
	}
	holeFlows(t, a1, 4)
	if b.Flows() != 4 {
		t.Fatalf("Budget holds %d flows, want 4", b.Flows())
	}
	s := ab(100, fSYN, "")
	s.sport = 99
	if err := a2.HandleIPv4(appendIPv4(nil, s), 1); err != nil {
		t.Fatal(err)
	}
	if st := a2.Stats(); st.FlowsRefused != 1 || st.Flows != 0 || st.Segments != 1 {
		t.Fatalf("second Assembler at a full Budget: %+v", st)
	}
	s.sport = 5
	if err := a1.HandleIPv4(appendIPv4(nil, s), 1e9); err != nil {
		t.Fatal(err)
	}
	if st := a1.Stats(); st.Evictions != 1 || b.Flows() != 4 {
		t.Fatalf("first Assembler at a full Budget: %d evictions, Budget %d flows; want 1, 4", st.Evictions, b.Flows())
	}
	a1.Close()
	if b.Flows() != 0 || b.BufferBytes() != 0 {
		t.Fatalf("after Close: Budget holds %d flows, %d buffer bytes; want 0", b.Flows(), b.BufferBytes())
	}
	s.sport = 99
	if err := a2.HandleIPv4(appendIPv4(nil, s), 2); err != nil {
		t.Fatal(err)
	}
	if st := a2.Stats(); st.Flows != 1 || st.FlowsRefused != 1 {
		t.Fatalf("second Assembler after the first closed: %+v", st)
	}
}

// TestBudgetBuffers: two Assemblers share a Budget of two buffers. The
// first holds both (bytes behind a hole in two directions); the second,
// holding none to take back, skips the hole in front of its bytes instead
// of holding them, counted in BufferTotalSkips, and delivers them.
func TestBudgetBuffers(t *testing.T) {
	b, _ := mirror.NewBudget(64, 2048)
	cfg := mirror.Config{Budget: b, BufferPerFlow: 1024, HoleTimeout: -1}
	a1, _ := mirror.New(cfg, newRecorder(t))
	rec2 := newRecorder(t)
	a2, _ := mirror.New(cfg, rec2)
	holeFlows(t, a1, 2)
	if b.BufferBytes() != 2048 {
		t.Fatalf("Budget holds %d buffer bytes, want 2048", b.BufferBytes())
	}
	holeFlows(t, a2, 1)
	st := a2.Stats()
	if st.BufferTotalSkips != 1 || st.GapBytes != 2 || st.DeliveredBytes != 4 {
		t.Fatalf("second Assembler at a full Budget: %+v", st)
	}
	k := keyAB
	k.SrcPort = 1
	if got, want := eventsOf(rec2, k), []string{"start", `data 0 "ab"`, "gap 2 2", `data 4 "ef"`}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	a1.Close()
	a2.Close()
	if b.Flows() != 0 || b.BufferBytes() != 0 {
		t.Fatalf("after Close: Budget holds %d flows, %d buffer bytes; want 0", b.Flows(), b.BufferBytes())
	}
}

// TestBudgetConcurrent runs four Assemblers on four goroutines over one
// small Budget, each with many directions holding bytes behind holes: the
// Budget is never exceeded (checked through the race detector's eyes too)
// and is empty again once they close.
func TestBudgetConcurrent(t *testing.T) {
	b, _ := mirror.NewBudget(64, 16*1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for q := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := mirror.New(mirror.Config{MaxFlows: 64, Budget: b, BufferPerFlow: 1024, HoleTimeout: -1}, &nopHandler{})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			rng := rand.New(rand.NewPCG(uint64(q), 1))
			for i := range 5000 {
				s := ab(100, 0, "xy")
				s.src[3] = byte(q)
				s.sport = uint16(1 + rng.IntN(200))
				switch rng.IntN(3) {
				case 0:
					s.flags |= fSYN
					s.data = ""
				case 1:
					s.seq = 101
				default:
					s.seq = 101 + uint32(rng.IntN(500))
				}
				a.HandleIPv4(appendIPv4(nil, s), int64(i)*1000)
				if f, n := b.Flows(), b.BufferBytes(); f > 64 || n > 16*1024 {
					mu.Lock()
					errs = append(errs, errors.New("Budget exceeded"))
					mu.Unlock()
					return
				}
			}
			a.Close()
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if b.Flows() != 0 || b.BufferBytes() != 0 {
		t.Fatalf("after Close: Budget holds %d flows, %d buffer bytes; want 0", b.Flows(), b.BufferBytes())
	}
}

func TestBudgetConfig(t *testing.T) {
	for _, c := range []struct {
		flows int
		bytes int64
	}{{0, 1024}, {mirror.MaxMaxFlows + 1, 1024}, {4, 0}, {4, mirror.MaxMaxBufferTotal + 1}} {
		if _, err := mirror.NewBudget(c.flows, c.bytes); !errors.Is(err, mirror.ErrConfig) {
			t.Errorf("NewBudget(%d, %d): %v, want ErrConfig", c.flows, c.bytes, err)
		}
	}
	b, _ := mirror.NewBudget(4, 1000)
	if _, err := mirror.New(mirror.Config{BufferPerFlow: 1024, Budget: b}, &nopHandler{}); !errors.Is(err, mirror.ErrConfig) {
		t.Errorf("a Budget smaller than BufferPerFlow: %v, want ErrConfig", err)
	}
}
