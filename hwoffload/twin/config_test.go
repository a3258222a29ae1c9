package twin_test

import (
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
)

// TestFilters: MIRROR_CTRL, MIRROR_SERVER_IP/PORT and FAST_CTRL decide what
// is reassembled and what is written.
func TestFilters(t *testing.T) {
	f, path := capture(t, capgen.Options{Messages: 300, Seed: 6, Flows: 2})
	server := f.Flows[1].Server // both flows' server: capgen gives every flow the same one
	for _, c := range []struct {
		name    string
		cfg     hwoffload.Config
		records int // trades + orders expected
		frames  bool
		events  bool
	}{
		{"all", hwoffload.Config{}, len(f.Records), true, true},
		{"mirror off", hwoffload.Config{DisableMirror: true}, 0, false, false},
		{"FAST off", hwoffload.Config{DisableFAST: true}, 0, true, true},
		{"server", hwoffload.Config{MirrorServer: netip.AddrPortFrom(server.Addr, server.Port)}, len(f.Records), true, true},
		{"server IP only", hwoffload.Config{MirrorServer: netip.AddrPortFrom(server.Addr, 0)}, len(f.Records), true, true},
		{"server other port", hwoffload.Config{MirrorServer: netip.AddrPortFrom(server.Addr, server.Port+1)}, 0, false, false},
		{"server nobody", hwoffload.Config{MirrorServer: netipAddrPort("192.0.2.1:1")}, 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, dev := start(t, openPcap(t, path), 14)
			if err := dev.Configure(c.cfg); err != nil {
				t.Fatal(err)
			}
			if err := dev.Run(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			out := drain(t, dev)
			if err := dev.Err(); err != nil {
				t.Fatal(err)
			}
			if n := len(out.trades) + len(out.orders); n != c.records {
				t.Errorf("%d records, want %d", n, c.records)
			}
			cn := dev.Counters()
			if cn.RxFrames != uint64(len(f.Frames)) {
				t.Errorf("RX_FRAMES %d of %d", cn.RxFrames, len(f.Frames))
			}
			if dropped := cn.RxDropped == cn.RxFrames; dropped == c.frames {
				t.Errorf("RX_DROPPED %d of %d frames", cn.RxDropped, cn.RxFrames)
			}
			if (len(out.events) > 0) != c.events {
				t.Errorf("%d events", len(out.events))
			}
			if cn.Trades+cn.Orders != uint64(c.records) {
				t.Errorf("TRADES %d + ORDERS %d, want %d", cn.Trades, cn.Orders, c.records)
			}
		})
	}
}

// TestSpeed: at a multiple of the recorded pace the replay takes about
// that long, never less.
func TestSpeed(t *testing.T) {
	f, path := capture(t, capgen.Options{Messages: 200, Seed: 7})
	span := time.Duration(f.Frames[len(f.Frames)-1].Time - f.Frames[0].Time)
	const speed = 4
	tw, err := twin.New(twin.Config{Input: openPcap(t, path), Speed: speed})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	m, _ := tw.Region().Map()
	dev, err := hwoffload.OpenRegion(ctxT(t), m)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	t0 := time.Now()
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctxT(t), hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	if took, want := time.Since(t0), span/speed; took < want-2*time.Millisecond {
		t.Errorf("replay took %v, the capture spans %v at speed %d: %v", took, span, speed, want)
	} else {
		t.Logf("capture of %v at speed %d took %v", span, speed, took)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []twin.Config{
		{RingLog2: 3}, {RingLog2: 21}, {Speed: -1}, {Speed: math.NaN()}, {Speed: math.Inf(1)}, {Batch: -1}, {Batch: 5000},
		{Addr: netipPrefix("::1/64")},
	} {
		if tw, err := twin.New(cfg); !errors.Is(err, twin.ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
			if tw != nil {
				tw.Close()
			}
		}
	}
}

// TestInMemory runs the twin with its region in Go memory, as on systems
// without file mapping.
func TestInMemory(t *testing.T) {
	f, path := capture(t, capgen.Options{Messages: 100, Seed: 8})
	tw, dev := startInMemory(t, openPcap(t, path), 12)
	if tw.Path() != "" {
		t.Errorf("Path %q", tw.Path())
	}
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	compare(t, f, drain(t, dev))
}

func TestCloseTwiceConcurrently(t *testing.T) {
	tw, err := twin.New(twin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- tw.Close() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
