package twin_test

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
)

// hostWritable lists every register the host may write.
var hostWritable = []int{
	hwoffload.RegControl, hwoffload.RegIPAddr, hwoffload.RegNetmask, hwoffload.RegGateway,
	hwoffload.RegMACHi, hwoffload.RegMACLo, hwoffload.RegMirrorCtrl, hwoffload.RegMirrorServerIP,
	hwoffload.RegMirrorServerPort, hwoffload.RegFastCtrl,
	hwoffload.RingReg(0, hwoffload.RingCons), hwoffload.RingReg(1, hwoffload.RingCons),
	hwoffload.RingReg(2, hwoffload.RingCons), hwoffload.RingReg(3, hwoffload.RingCons),
}

// FuzzRegisters writes random values into every host-writable register
// while the twin consumes a capture, reading the rings between writes: the
// twin must never crash or hang, keep MAGIC, keep counting CYCLES, report
// only known ERROR codes and still answer a RESET.
func FuzzRegisters(f *testing.F) {
	feed, err := capgen.Generate(capgen.Options{Messages: 60, Seed: 9, Impair: capgen.Impairments{Loss: 0.05}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 1, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 10, 200, 0, 0, 0, 0, 2, 0, 0, 0})
	f.Add([]byte{0, 0x80, 0, 0, 0, 2, 0, 0xff, 0, 0xff, 4, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 5*64 {
			data = data[:5*64]
		}
		tw, err := twin.New(twin.Config{Input: feed.Source(), RingLog2: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer tw.Close()
		m, err := tw.Region().Map()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		dev, err := hwoffload.OpenRegion(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		for ; len(data) >= 5; data = data[5:] {
			off := hostWritable[int(data[0])%len(hostWritable)]
			dev.Write32(off, binary.LittleEndian.Uint32(data[1:]))
			for k := range hwoffload.NumRings {
				dev.Ring(k).Read()
			}
			runtime.Gosched()
		}
		c0 := dev.Cycles()
		if err := dev.Reset(ctx); err != nil {
			t.Fatalf("RESET not answered: %v", err)
		}
		for dev.Cycles() == c0 {
			if ctx.Err() != nil {
				t.Fatal("CYCLES stopped")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if dev.Read32(hwoffload.RegMagic) != hwoffload.Magic {
			t.Fatal("MAGIC lost")
		}
		var ee *hwoffload.EngineError
		if err := dev.Err(); errors.As(err, &ee) && int(ee.Code) >= len(hwoffload.ErrorCodes) {
			t.Fatalf("unknown ERROR %v", err)
		}
	})
}
