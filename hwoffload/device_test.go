package hwoffload_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/shm"
)

// produce plays the engine: it writes n trades on ring k of r, the ith with
// seq seq0+i, and publishes them.
func produce(r *shm.Region, k, n int, seq0 uint64) {
	base := int(r.Load64(hwoffload.RingReg(k, hwoffload.RingBase)))
	slots := uint32(1) << r.Load32(hwoffload.RingReg(k, hwoffload.RingLog2Slots))
	prod := r.Load32(hwoffload.RingReg(k, hwoffload.RingProd))
	for i := range n {
		off := base + int(prod&(slots-1))*hwoffload.SlotBytes
		s := hwoffload.Slot(r.Bytes()[off : off+hwoffload.SlotBytes])
		s.Clear()
		s.PutHeader(hwoffload.KindTrade, 0, seq0+uint64(i), 1, 2)
		s.PutTrade(&sse.Trade{TradeIndex: uint32(seq0) + uint32(i), BizIndex: 1})
		prod++
		r.Store32(hwoffload.RingReg(k, hwoffload.RingProd), prod)
	}
}

func openFake(t *testing.T, log2 int) (*shm.Region, *hwoffload.Device) {
	t.Helper()
	r := hwoffload.FakeRegion(log2)
	m, err := r.Map()
	if err != nil {
		t.Fatal(err)
	}
	d, err := hwoffload.OpenRegion(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); r.Close() })
	return r, d
}

func TestRingRead(t *testing.T) {
	r, d := openFake(t, 4)
	ring := d.Ring(hwoffload.RingTrades)
	if _, _, ok := ring.Read(); ok {
		t.Fatal("a record in an empty ring")
	}
	produce(r, 0, 3, 0)
	produce(r, 0, 2, 10) // seq 3..9 dropped by the engine
	var tr sse.Trade
	wantLost := []uint64{0, 0, 0, 7, 0}
	for i, wl := range wantLost {
		s, lost, ok := ring.Read()
		if !ok || lost != wl || !s.Trade(&tr) {
			t.Fatalf("read %d: ok %v lost %d (want %d)", i, ok, lost, wl)
		}
	}
	if _, _, ok := ring.Read(); ok {
		t.Fatal("a sixth record")
	}
	if c := r.Load32(hwoffload.RingReg(0, hwoffload.RingCons)); c != 5 {
		t.Errorf("CONS %d after reading 5", c)
	}
	if ring.Lost() != 7 || tr.TradeIndex != 11 {
		t.Errorf("Lost %d, last trade %d", ring.Lost(), tr.TradeIndex)
	}

	// Wrap around the ring several times.
	for round := range 5 {
		produce(r, 0, 16, 12+uint64(round)*16)
		for i := range 16 {
			if s, lost, ok := ring.Read(); !ok || lost != 0 || s.Seq() != 12+uint64(round*16+i) {
				t.Fatalf("round %d read %d: ok %v lost %d seq %d", round, i, ok, lost, s.Seq())
			}
		}
	}
}

// TestRingReadAllocs: reading a record and decoding it allocates nothing.
func TestRingReadAllocs(t *testing.T) {
	r, d := openFake(t, 10)
	ring := d.Ring(hwoffload.RingTrades)
	var tr sse.Trade
	produce(r, 0, 1000, 0)
	allocs := testing.AllocsPerRun(900, func() {
		s, _, ok := ring.Read()
		if !ok || !s.Trade(&tr) {
			panic("no record")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per record", allocs)
	}
}

func TestWaitSpinsAndSleeps(t *testing.T) {
	r, d := openFake(t, 4)
	for _, poll := range []time.Duration{0, 50 * time.Microsecond} {
		ring := d.Ring(hwoffload.RingOrders)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if _, _, err := ring.Wait(ctx, poll); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("poll %v: Wait on an empty ring: %v", poll, err)
		}
		cancel()
		go produce(r, hwoffload.RingOrders, 1, 0)
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		if s, _, err := ring.Wait(ctx, poll); err != nil || s.Kind() != hwoffload.KindTrade {
			t.Errorf("poll %v: %v", poll, err)
		}
		cancel()
		ring.Read() // release
		r.Store32(hwoffload.RingReg(hwoffload.RingOrders, hwoffload.RingProd), 0)
		r.Store32(hwoffload.RingReg(hwoffload.RingOrders, hwoffload.RingCons), 0)
		d.Close()
		m, _ := r.Map()
		d, _ = hwoffload.OpenRegion(context.Background(), m)
	}
	d.Close()
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, spec := range []string{"", "twin:", "tap:eth0", "/dev/shm/x"} {
		if _, err := hwoffload.Open(ctx, spec); !errors.Is(err, hwoffload.ErrSpec) {
			t.Errorf("Open(%q): %v, want ErrSpec", spec, err)
		}
	}
	if _, err := hwoffload.Open(ctx, "pci:../../etc"); !errors.Is(err, hwoffload.ErrSpec) {
		t.Errorf("pci: with a bad address: %v", err)
	}
	if _, err := hwoffload.Open(ctx, "twin:"+filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing region: %v", err)
	}

	bad := func(name string, mutate func(r *shm.Region)) {
		r := hwoffload.FakeRegion(4)
		defer r.Close()
		mutate(r)
		m, _ := r.Map()
		if _, err := hwoffload.OpenRegion(ctx, m); !errors.Is(err, hwoffload.ErrBadRegion) {
			t.Errorf("%s: %v, want ErrBadRegion", name, err)
		}
	}
	bad("MAGIC", func(r *shm.Region) { r.Store32(hwoffload.RegMagic, 1) })
	bad("VERSION", func(r *shm.Region) { r.Store32(hwoffload.RegVersion, 2) })
	bad("BASE in the window", func(r *shm.Region) { r.Store64(hwoffload.RingReg(1, hwoffload.RingBase), 0x100) })
	bad("BASE misaligned", func(r *shm.Region) { r.Store64(hwoffload.RingReg(1, hwoffload.RingBase), 0x10008) })
	bad("BASE past the end", func(r *shm.Region) { r.Store64(hwoffload.RingReg(3, hwoffload.RingBase), 1<<62) })
	bad("rings overlap", func(r *shm.Region) {
		r.Store64(hwoffload.RingReg(1, hwoffload.RingBase), r.Load64(hwoffload.RingReg(0, hwoffload.RingBase)))
	})
	bad("LOG2_SLOTS", func(r *shm.Region) { r.Store32(hwoffload.RingReg(2, hwoffload.RingLog2Slots), 30) })
	bad("SLOT_BYTES", func(r *shm.Region) { r.Store32(hwoffload.RingReg(2, hwoffload.RingSlotBytes), 64) })

	// A region whose MAGIC is not written yet: Open waits until ctx ends.
	r, _ := shm.New(hwoffload.WindowBytes)
	defer r.Close()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := hwoffload.OpenRegion(short, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("MAGIC 0: %v", err)
	}
	if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
		empty := filepath.Join(t.TempDir(), "small")
		os.WriteFile(empty, make([]byte, 4096), 0o600)
		if _, err := hwoffload.Open(ctx, "twin:"+empty); !errors.Is(err, hwoffload.ErrBadRegion) {
			t.Errorf("4 KiB region: %v", err)
		}
	}
}

// TestWaitSpinGOMAXPROCS1: a spinning Wait lets a producer goroutine run
// even with one P.
func TestWaitSpinGOMAXPROCS1(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r, d := openFake(t, 4)
	ring := d.Ring(hwoffload.RingTrades)
	go produce(r, hwoffload.RingTrades, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if _, _, err := ring.Wait(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("record after %v", time.Since(start))
}
