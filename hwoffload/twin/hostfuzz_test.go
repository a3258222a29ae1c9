package twin_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/link/pipe"
)

// hostPathWritable lists the host path's host-writable registers: CMD_PROD,
// UDP_RX_CONS and every session's RX_CONS.
func hostPathWritable() []int {
	offs := []int{hwoffload.RegCmdProd, hwoffload.RegUDPRxCons}
	for s := range hwoffload.Sessions {
		offs = append(offs, hwoffload.SessReg(s, hwoffload.SessRxCons))
	}
	return offs
}

// hostFuzzTwin runs a twin with a host path to a peer stack that echoes TCP
// on port 9000 and UDP on port 9001, its region in Go memory.
func hostFuzzTwin(t *testing.T) (*hwoffload.Device, []byte) {
	a, b := pipe.New(pipe.Options{})
	peer, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	if _, err := peer.ServeTCP(9000, func(c *tickwire.TCPConn, data []byte, err error) {
		if err != nil {
			c.Close()
			return
		}
		c.Write(data)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.ServeUDP(9001, func(c *tickwire.UDPConn, p []byte, from netip.AddrPort) {
		c.WriteToUDPAddrPort(p, from)
	}); err != nil {
		t.Fatal(err)
	}
	tw, dev := startConfig(t, twin.Config{Link: a, RingLog2: 4})
	return dev, tw.Region().Bytes()
}

// FuzzHostPath writes random values into every host-writable register
// (the configuration, CONTROL, the rings' CONS, the host path's) and random
// commands into the command ring while the twin's host path runs against a
// peer: the twin must not crash or hang, must set ERROR for a command of an
// unknown op, keep MAGIC and answer a RESET. Each input is records of 6
// bytes: a selector, then a 32-bit value and a byte.
func FuzzHostPath(f *testing.F) {
	f.Add([]byte{200, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 4, 0x02, 0x09, 0x0a, 0x01, 0, 64, 1, 0, 0, 0, 0, 66, 40, 0x23, 0, 0, 0})
	f.Add([]byte{64, 5, 0, 0, 0, 0, 65, 0xff, 0xff, 0, 0, 0, 66, 0, 0, 0, 0, 0, 20, 0xff, 0xff, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 6*64 {
			data = data[:6*64]
		}
		dev, mem := hostFuzzTwin(t)
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		dev.Write32(hwoffload.RegIPAddr, 0x0a090002)
		dev.Write32(hwoffload.RegNetmask, 0xffffff00)
		regs := append(slices.Clone(hostWritable), hostPathWritable()...)
		cmdBase := int(dev.Read64(hwoffload.RegCmdBase))
		for ; len(data) >= 6; data = data[6:] {
			sel, v, x := int(data[0]), binary.LittleEndian.Uint32(data[1:]), data[5]
			if sel < 128 {
				dev.Write32(regs[sel%len(regs)], v)
			} else {
				// A command: op from the selector, fields from v and x.
				var c [hwoffload.CmdSlotBytes]byte
				hwoffload.CmdSlot(c[:]).Put(hwoffload.Command{Op: uint16(sel - 128), Session: uint16(x % 70),
					IP: 0x0a090001, Port: uint16(v), DstPort: uint16(v >> 16), Length: v % 40000, Offset: v >> 8})
				prod := dev.Read32(hwoffload.RegCmdProd)
				if prod-dev.Read32(hwoffload.RegCmdCons) < 1<<hwoffload.CmdLog2Slots {
					off := cmdBase + int(prod%(1<<hwoffload.CmdLog2Slots))*hwoffload.CmdSlotBytes
					copy(mem[off:], c[:])
					dev.Write32(hwoffload.RegCmdProd, prod+1)
				}
			}
			for k := range hwoffload.NumRings {
				dev.Ring(k).Read()
			}
			runtime.Gosched()
		}
		if err := dev.Reset(ctx); err != nil {
			t.Fatalf("RESET not answered: %v", err)
		}
		if dev.Read32(hwoffload.RegMagic) != hwoffload.Magic {
			t.Fatal("MAGIC lost")
		}
		// A command of an unknown op sets ERROR BAD_COMMAND.
		if err := dev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := refusedCommand(ctx, dev, mem); err != nil {
			t.Fatal(err)
		}
	})
}

// refusedCommand writes a command of op 0xEEEE and returns how long the
// engine took to set ERROR BAD_COMMAND.
func refusedCommand(ctx context.Context, dev *hwoffload.Device, mem []byte) (time.Duration, error) {
	cmdBase := int(dev.Read64(hwoffload.RegCmdBase))
	for dev.Read32(hwoffload.RegCmdProd) != dev.Read32(hwoffload.RegCmdCons) {
		if ctx.Err() != nil {
			return 0, errors.New("commands not taken")
		}
		runtime.Gosched()
	}
	prod := dev.Read32(hwoffload.RegCmdProd)
	off := cmdBase + int(prod%(1<<hwoffload.CmdLog2Slots))*hwoffload.CmdSlotBytes
	hwoffload.CmdSlot(mem[off : off+hwoffload.CmdSlotBytes]).Put(hwoffload.Command{Op: 0xEEEE})
	t0 := time.Now()
	dev.Write32(hwoffload.RegCmdProd, prod+1)
	for {
		var ee *hwoffload.EngineError
		if errors.As(dev.Err(), &ee) && ee.Code == hwoffload.CodeBadCommand {
			return time.Since(t0), nil
		}
		if ctx.Err() != nil {
			return 0, errors.New("ERROR not set for a command of an unknown op")
		}
		runtime.Gosched()
	}
}

// TestRefusedWithin10ms: a refused command sets ERROR within 10 ms (the
// median of 15 tries, so that a loaded machine's scheduling does not fail
// the test; every try must set it).
func TestRefusedWithin10ms(t *testing.T) {
	dev, mem := hostFuzzTwin(t)
	ctx := ctxT(t)
	var took []time.Duration
	for range 15 {
		if err := dev.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if err := dev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := refusedCommand(ctx, dev, mem)
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	if took[len(took)/2] > 10*time.Millisecond {
		t.Errorf("ERROR set after %v (median), want within 10 ms; all: %v", took[len(took)/2], took)
	}
	t.Logf("ERROR set after %v median, %v max", took[len(took)/2], took[len(took)-1])
}
