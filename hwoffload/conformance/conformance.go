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
// RUN/STOP and RESET, the refusal of bad writes (read-only registers, the
// host path's and every session's among them,
// undefined CONTROL bits, CONS ahead of PROD, bad configuration values, the
// host path's CMD_PROD, RX_CONS and UDP_RX_CONS ahead, a command of an
// unknown op), and the host path's geometry and commands that need no peer
// (LISTEN and UDP_BIND set their port bits, UNLISTEN and UDP_UNBIND clear
// them, CLOSE of a free session is NOT_OPEN; completions that find ring 3
// full are held back, counted in HOST_HELD and all delivered in order).
// RunInput adds what needs a
// finite input on the engine's port: a full ring drops and counts, seq
// shows the loss, INPUT_DONE.
//
// A card owner runs it with one command, from the repository:
//
//	TICKWIRE_CONFORMANCE_DEVICE=pci:0000:65:00.0 go test -run TestDevice ./hwoffload/conformance/
//
// (TestDevice skips without the variable; twin:/dev/shm/NAME works too.)
// Not covered: record contents against a known input (the twin's tests do
// that with a capture) and the host path's traffic with a peer (the twin's
// tests and examples/u50twin's TAP test do).
package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
			refused(t, dev, b.off, b.v, b.code, b.after)
		})
	}
	hostPath(t, dev, reset)
	reset(t)
}

// refused writes v at off and waits for ERROR code and the register put
// back to after.
func refused(t *testing.T, dev *hwoffload.Device, off int, v uint32, code hwoffload.ErrorCode, after uint32) {
	t.Helper()
	start := time.Now()
	dev.Write32(off, v)
	for {
		var ee *hwoffload.EngineError
		if err := dev.Err(); errors.As(err, &ee) && ee.Code == code && dev.Read32(off) == after {
			break
		}
		if time.Since(start) > Patience {
			t.Fatalf("ERROR %v, register %#x = %#x; want %v and %#x", dev.Err(), off, dev.Read32(off), code, after)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Logf("refused after %v (the contract says 10 ms; a loaded machine may take longer)", d)
	}
	if dev.Status()&hwoffload.StatusError == 0 {
		t.Error("STATUS.ERROR clear with ERROR set")
	}
}

// hostPath checks the host path's registers and the commands that need no
// peer.
func hostPath(t *testing.T, dev *hwoffload.Device, reset func(*testing.T)) {
	t.Run("HostPathGeometry", func(t *testing.T) {
		reset(t)
		for _, c := range []struct {
			off  int
			want uint32
		}{
			{hwoffload.RegCmdSlotBytes, hwoffload.CmdSlotBytes}, {hwoffload.RegSessions, hwoffload.Sessions},
			{hwoffload.RegSessBufBytes, hwoffload.SessBufBytes}, {hwoffload.RegUDPRxBytes, hwoffload.UDPAreaBytes},
			{hwoffload.RegUDPTxBytes, hwoffload.UDPAreaBytes}, {hwoffload.RegCmdProd, 0}, {hwoffload.RegCmdCons, 0},
			{hwoffload.RegUDPRxProd, 0}, {hwoffload.RegUDPRxCons, 0},
		} {
			if v := dev.Read32(c.off); v != c.want {
				t.Errorf("register %#x = %d after RESET, want %d", c.off, v, c.want)
			}
		}
		if l := dev.Read32(hwoffload.RegCmdLog2Slots); l < 1 || l > 16 {
			t.Errorf("CMD_LOG2_SLOTS %d", l)
		}
		for s := range hwoffload.Sessions {
			for _, reg := range hwoffload.SessionRegisters {
				if v := dev.Read32(hwoffload.SessReg(s, reg.Offset)); v != 0 {
					t.Errorf("session %d %s = %d after RESET", s, reg.Name, v)
				}
			}
		}
	})
	t.Run("RefusesCmdProdAhead", func(t *testing.T) {
		reset(t)
		refused(t, dev, hwoffload.RegCmdProd, 1<<dev.Read32(hwoffload.RegCmdLog2Slots)+1, hwoffload.CodeBadCommand, 0)
	})
	t.Run("RefusesRxConsAhead", func(t *testing.T) {
		reset(t)
		refused(t, dev, hwoffload.SessReg(hwoffload.Sessions-1, hwoffload.SessRxCons), 5, hwoffload.CodeConsAhead, 0)
	})
	t.Run("RefusesUDPRxConsAhead", func(t *testing.T) {
		reset(t)
		refused(t, dev, hwoffload.RegUDPRxCons, 100, hwoffload.CodeConsAhead, 0)
	})
	// Every read-only register of the host path is put back when the
	// host writes it: the window's, each session's (all but RX_CONS), ring
	// 3's PROD and DROPPED, an ARP table entry and the port bitmaps.
	ro := []struct {
		name string
		off  int
	}{
		{"CMD_CONS", hwoffload.RegCmdCons}, {"UDP_RX_PROD", hwoffload.RegUDPRxProd},
		{"UDP_RX_DROPPED", hwoffload.RegUDPRxDropped}, {"HOST_REFUSED", hwoffload.RegHostRefused},
		{"SESS_BASE", hwoffload.RegSessBase}, {"ring 3 PROD", hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingProd)},
		{"ring 3 DROPPED", hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingDropped)},
		{"ARP entry 127 ip", hwoffload.ARPReg(hwoffload.MaxARPEntries-1, hwoffload.ARPAddr)},
		{"UDP port bitmap", hwoffload.RegUDPPorts + 4}, {"listen port bitmap", hwoffload.RegListenPorts + 0x1FFC},
	}
	for s := range hwoffload.Sessions {
		for _, reg := range hwoffload.SessionRegisters {
			if reg.Access == hwoffload.RO && (s == 0 || s == hwoffload.Sessions-1 || reg.Offset == hwoffload.SessState) {
				ro = append(ro, struct {
					name string
					off  int
				}{fmt.Sprintf("session %d %s", s, reg.Name), hwoffload.SessReg(s, reg.Offset)})
			}
		}
	}
	t.Run("RefusesReadOnlyHostRegisters", func(t *testing.T) {
		for _, r := range ro {
			t.Run(strings.ReplaceAll(r.name, " ", "_"), func(t *testing.T) {
				reset(t) // ERROR holds the last code: one refusal at a time
				old := dev.Read32(r.off)
				refused(t, dev, r.off, ^old, hwoffload.CodeReadOnly, old)
			})
		}
	})
	t.Run("Ring3HoldsCompletions", func(t *testing.T) {
		// Before Commands: nothing has started the Device's dispatcher,
		// so this test reads ring 3 itself.
		reset(t)
		ctx, cancel := context.WithTimeout(context.Background(), Patience)
		defer cancel()
		if dev.Read32(hwoffload.RegIPAddr) == 0 {
			dev.Write32(hwoffload.RegIPAddr, 0x0a0b0c0d) // commands need an address
		}
		if err := dev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		defer dev.Stop(ctx)
		ring := dev.Ring(hwoffload.RingHost)
		n := ring.Slots() + 40
		// CLOSE of a free session needs no peer: each completes NOT_OPEN.
		// Ring 3 may have more slots than the command ring: commands are
		// written as the engine takes them.
		cmdSlots := uint32(1) << dev.Read32(hwoffload.RegCmdLog2Slots)
		for i := 0; i < n; {
			if dev.Read32(hwoffload.RegCmdProd)-dev.Read32(hwoffload.RegCmdCons) >= cmdSlots {
				if ctx.Err() != nil {
					t.Fatalf("the engine took %d commands of %d", i, n)
				}
				time.Sleep(10 * time.Microsecond)
				continue
			}
			if err := dev.WriteCommand(hwoffload.Command{Op: hwoffload.OpClose, Session: 1, Tag: uint32(1000 + i)}); err != nil {
				t.Fatal(err)
			}
			i++
		}
		for dev.Read64(hwoffload.RegHostHeld) != uint64(n-ring.Slots()) {
			if ctx.Err() != nil {
				t.Fatalf("HOST_HELD %d, want %d: the completions that find ring 3 full are held back",
					dev.Read64(hwoffload.RegHostHeld), n-ring.Slots())
			}
			time.Sleep(100 * time.Microsecond)
		}
		for i := range n {
			s, _, err := ring.Wait(ctx, 100*time.Microsecond)
			if err != nil {
				t.Fatalf("completion %d of %d: %v", i, n, err)
			}
			tag, op, st, _, _ := s.Completion()
			if s.Kind() != hwoffload.KindCompletion || s.Seq() != uint64(i) || tag != uint32(1000+i) || op != hwoffload.OpClose || st != hwoffload.StatusNotOpen {
				t.Fatalf("record %d: kind %d seq %d tag %d op %d status %d", i, s.Kind(), s.Seq(), tag, op, st)
			}
		}
		ring.Read()
		if ring.Dropped() != 0 || ring.Lost() != 0 {
			t.Errorf("ring 3 DROPPED %d, lost %d: a completion was dropped", ring.Dropped(), ring.Lost())
		}
	})
	t.Run("Commands", func(t *testing.T) {
		reset(t)
		ctx, cancel := context.WithTimeout(context.Background(), Patience)
		defer cancel()
		if dev.Read32(hwoffload.RegIPAddr) == 0 {
			dev.Write32(hwoffload.RegIPAddr, 0x0a0b0c0d) // LISTEN needs an address
		}
		if err := dev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		defer dev.Stop(ctx)
		st, _, _, err := dev.Exec(ctx, hwoffload.Command{Op: 0xEEEE})
		var ee *hwoffload.EngineError
		if st != hwoffload.StatusBadCommand || !errors.As(dev.Err(), &ee) || ee.Code != hwoffload.CodeBadCommand {
			t.Errorf("unknown op: status %d (%v), ERROR %v; want BAD_COMMAND", st, err, dev.Err())
		}
		if st, _, _, _ := dev.Exec(ctx, hwoffload.Command{Op: hwoffload.OpClose, Session: 3}); st != hwoffload.StatusNotOpen {
			t.Errorf("CLOSE of a free session: status %d, want NOT_OPEN", st)
		}
		bit := func(base int, p uint16) bool { return dev.Read32(base+int(p/32)*4)&(1<<(p%32)) != 0 }
		// The network configuration is taken at RUN: a change while
		// stopped keeps the listeners and UDP ports open (on the new
		// address); one while running is refused.
		for _, op := range []int{hwoffload.OpListen, hwoffload.OpUDPBind} {
			if _, _, _, err := dev.Exec(ctx, hwoffload.Command{Op: uint16(op), Port: 4322}); err != nil {
				t.Fatalf("op %d 4322: %v", op, err)
			}
		}
		if err := dev.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		ip := dev.Read32(hwoffload.RegIPAddr) ^ 1
		dev.Write32(hwoffload.RegIPAddr, ip)
		if err := dev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if dev.Read32(hwoffload.RegIPAddr) != ip {
			t.Errorf("IP_ADDR %#x after a change while stopped, want %#x", dev.Read32(hwoffload.RegIPAddr), ip)
		}
		if !bit(hwoffload.RegListenPorts, 4322) || !bit(hwoffload.RegUDPPorts, 4322) {
			t.Error("a listener or UDP port lost its bit across a configuration change at RUN")
		}
		for _, op := range []int{hwoffload.OpUnlisten, hwoffload.OpUDPUnbind} {
			if _, _, _, err := dev.Exec(ctx, hwoffload.Command{Op: uint16(op), Port: 4322}); err != nil {
				t.Errorf("op %d 4322 after the change: %v (the port did not stay open)", op, err)
			}
		}
		refused(t, dev, hwoffload.RegIPAddr, ip^2, hwoffload.CodeWhileRunning, ip)
		if err := dev.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := dev.Reset(ctx); err != nil { // clears ERROR
			t.Fatal(err)
		}
		if err := dev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name            string
			on, off, bitmap int
		}{
			{"LISTEN", hwoffload.OpListen, hwoffload.OpUnlisten, hwoffload.RegListenPorts},
			{"UDP_BIND", hwoffload.OpUDPBind, hwoffload.OpUDPUnbind, hwoffload.RegUDPPorts},
		} {
			st, port, _, err := dev.Exec(ctx, hwoffload.Command{Op: uint16(c.on), Port: 4321})
			if err != nil || port != 4321 || !bit(c.bitmap, 4321) {
				t.Errorf("%s 4321: status %d port %d (%v), bit %v", c.name, st, port, err, bit(c.bitmap, 4321))
				continue
			}
			if st, _, _, _ := dev.Exec(ctx, hwoffload.Command{Op: uint16(c.on), Port: 4321}); st != hwoffload.StatusInUse {
				t.Errorf("%s twice: status %d, want IN_USE", c.name, st)
			}
			if _, _, _, err := dev.Exec(ctx, hwoffload.Command{Op: uint16(c.off), Port: 4321}); err != nil || bit(c.bitmap, 4321) {
				t.Errorf("undoing %s: %v, bit %v", c.name, err, bit(c.bitmap, 4321))
			}
		}
	})
}

// RunInput checks what needs a finite input on the engine's port of more
// trades than ring 0 holds (the twin: a capture; a card: a capture replayed
// onto its port, with INPUT_DONE as the card reports it): started with no
// record consumed, the engine fills ring 0, drops and counts the rest
// (DROPPED, TRADES: the records it wrote carry seq 0 to 2^LOG2_SLOTS-1,
// the dropped ones used up the seqs after them, so a record written after
// room freed shows the loss as a jump, which the twin's TestFullRing
// checks); INPUT_DONE is set; RESET empties the rings and counters. dev must be stopped, its
// input not yet consumed.
func RunInput(t *testing.T, dev *hwoffload.Device) {
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	r := dev.Ring(hwoffload.RingTrades)
	slots := uint32(r.Slots())
	prod := dev.Read32(hwoffload.RingReg(hwoffload.RingTrades, hwoffload.RingProd))
	dropped := r.Dropped()
	trades := dev.Counters().Trades
	if prod != slots || dropped == 0 || uint64(prod)+uint64(dropped) != trades {
		t.Fatalf("ring 0: PROD %d, DROPPED %d, TRADES %d with %d slots: want a full ring, the rest dropped", prod, dropped, trades, slots)
	}
	var last uint64
	n := 0
	for {
		s, _, ok := r.Read()
		if !ok {
			break
		}
		if s.Seq() != uint64(n) {
			t.Errorf("record %d has seq %d", n, s.Seq())
		}
		last = s.Seq()
		n++
	}
	if n != int(slots) || last != uint64(slots)-1 {
		t.Errorf("read %d records, last seq %d; want %d records, seq up to %d", n, last, slots, slots-1)
	}
	if err := dev.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range hwoffload.NumRings {
		if p := dev.Read32(hwoffload.RingReg(k, hwoffload.RingProd)); p != 0 || dev.Ring(k).Dropped() != 0 {
			t.Errorf("ring %d: PROD %d, DROPPED %d after RESET", k, p, dev.Ring(k).Dropped())
		}
	}
	if c := dev.Counters(); c.Trades != 0 || c.RxFrames != 0 {
		t.Errorf("counters %+v after RESET", c)
	}
}
