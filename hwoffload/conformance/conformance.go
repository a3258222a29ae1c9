// Package conformance checks that an offload engine behind a
// hwoffload.Device keeps the register map's contract (REGISTERS.md), the
// same suite for every backend: the twin passes it in CI, a card owner runs
// it against the card with one command (once the PCIe backend exists):
//
//	func TestCard(t *testing.T) {
//		dev, err := hwoffload.Open(ctx, "pci:0000:65:00.0")
//		...
//		conformance.Run(t, dev)
//	}
//
// Run needs an engine that is stopped and may be reset; it leaves it reset
// and stopped. It covers the identity and geometry registers, CYCLES,
// RUN/STOP and RESET, and the refusal of bad writes (read-only registers,
// undefined CONTROL bits, CONS ahead of PROD, bad configuration values).
// Not covered yet: record contents against a known input (the twin's tests
// do that with a capture; a card needs the capture on its port), full-ring
// drops, and the host path (not implemented).
package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
)

// Patience bounds each wait for the engine, generous for loaded machines;
// the contract's 10 ms for ERROR is logged, not enforced.
var Patience = 30 * time.Second

// Run runs the suite against dev as subtests of t.
func Run(t *testing.T, dev *hwoffload.Device) {
	ctx := context.Background()
	reset := func(t *testing.T) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, Patience)
		defer cancel()
		if err := dev.Stop(c); err != nil {
			t.Fatal(err)
		}
		if err := dev.Reset(c); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("Identity", func(t *testing.T) {
		if v := dev.Read32(hwoffload.RegMagic); v != hwoffload.Magic {
			t.Errorf("MAGIC %#x", v)
		}
		if v := dev.Read32(hwoffload.RegVersion); v != hwoffload.Version {
			t.Errorf("VERSION %d", v)
		}
		if v := dev.Read32(hwoffload.RegCycleHz); v != hwoffload.CycleHz {
			t.Errorf("CYCLE_HZ %d", v)
		}
		if n := dev.Read32(hwoffload.RegARPCount); n > hwoffload.MaxARPEntries {
			t.Errorf("ARP_COUNT %d", n)
		}
	})
	t.Run("Rings", func(t *testing.T) {
		for k := range hwoffload.NumRings {
			if v := dev.Read32(hwoffload.RingReg(k, hwoffload.RingSlotBytes)); v != hwoffload.SlotBytes {
				t.Errorf("ring %d SLOT_BYTES %d", k, v)
			}
			if b := dev.Read64(hwoffload.RingReg(k, hwoffload.RingBase)); b%hwoffload.RingAlign != 0 {
				t.Errorf("ring %d BASE %#x", k, b)
			}
		}
	})
	t.Run("Cycles", func(t *testing.T) {
		c0, t0 := dev.Cycles(), time.Now()
		for dev.Cycles() == c0 {
			if time.Since(t0) > Patience {
				t.Fatal("CYCLES does not count")
			}
			time.Sleep(time.Millisecond)
		}
		if d := time.Since(dev.Time(dev.Cycles())); d < -time.Second || d > time.Second {
			t.Errorf("CYCLES and CYCLES_EPOCH_NS give a time %v away from now", d)
		}
	})
	t.Run("RunStopReset", func(t *testing.T) {
		reset(t)
		c, cancel := context.WithTimeout(ctx, Patience)
		defer cancel()
		if err := dev.Run(c); err != nil {
			t.Fatal(err)
		}
		if err := dev.Stop(c); err != nil {
			t.Fatal(err)
		}
		if err := dev.Reset(c); err != nil {
			t.Fatal(err)
		}
		if dev.Read32(hwoffload.RegControl)&hwoffload.ControlReset != 0 {
			t.Error("RESET did not clear itself")
		}
		for k := range hwoffload.NumRings {
			for _, reg := range []int{hwoffload.RingProd, hwoffload.RingCons, hwoffload.RingDropped} {
				if v := dev.Read32(hwoffload.RingReg(k, reg)); v != 0 {
					t.Errorf("ring %d register +%#x = %d after RESET", k, reg, v)
				}
			}
		}
		if l := dev.Latency(); l.Count != 0 {
			t.Errorf("LAT_COUNT %d after RESET", l.Count)
		}
	})
	bad := []struct {
		name  string
		off   int
		v     uint32
		code  hwoffload.ErrorCode
		after uint32 // the register's value once put back
	}{
		{"ReadOnlyVersion", hwoffload.RegVersion, 7, hwoffload.CodeReadOnly, hwoffload.Version},
		{"ControlBits", hwoffload.RegControl, 1 << 5, hwoffload.CodeControlBits, 0},
		{"ConsAhead", hwoffload.RingReg(0, hwoffload.RingCons), 3, hwoffload.CodeConsAhead, 0},
		{"MACHi", hwoffload.RegMACHi, 1 << 20, hwoffload.CodeBadValue, 0},
	}
	for _, b := range bad {
		t.Run("Refuses"+b.name, func(t *testing.T) {
			reset(t)
			if b.off == hwoffload.RegMACHi {
				dev.Write32(hwoffload.RegMACHi, 0)
			}
			start := time.Now()
			dev.Write32(b.off, b.v)
			for {
				var ee *hwoffload.EngineError
				if err := dev.Err(); errors.As(err, &ee) && ee.Code == b.code && dev.Read32(b.off) == b.after {
					break
				}
				if time.Since(start) > Patience {
					t.Fatalf("ERROR %v, register %#x; want %v and %#x", dev.Err(), dev.Read32(b.off), b.code, b.after)
				}
				time.Sleep(100 * time.Microsecond)
			}
			if d := time.Since(start); d > 10*time.Millisecond {
				t.Logf("refused after %v (the contract says 10 ms; a loaded machine may take longer)", d)
			}
			if dev.Status()&hwoffload.StatusError == 0 {
				t.Error("STATUS.ERROR clear with ERROR set")
			}
		})
	}
	reset(t)
}
