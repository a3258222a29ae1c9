package hwoffload_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/shm"
)

// echoEngine plays the engine's host path on r until stop closes, without
// allocating: OPEN, UDP_BIND and CLOSE complete at once, a SEND's bytes
// come back in the session's RX buffer (with a RECV), a UDP_SEND's
// datagram comes back as a UDP_RECV from its destination. It assumes the
// host keeps up (no ring, buffer or area full).
func echoEngine(r *shm.Region, stop, done chan struct{}) {
	defer close(done)
	mem := r.Bytes()
	cmdBase, sessBase := int(r.Load64(hwoffload.RegCmdBase)), int(r.Load64(hwoffload.RegSessBase))
	rxBase, txBase := int(r.Load64(hwoffload.RegUDPRxBase)), int(r.Load64(hwoffload.RegUDPTxBase))
	ringBase := int(r.Load64(hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingBase)))
	slots := uint32(1) << r.Load32(hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingLog2Slots))
	var cons, prod3, udpProd uint32
	var seq uint64
	post := func(kind uint16, flow uint32) hwoffload.Slot {
		off := ringBase + int(prod3%slots)*hwoffload.SlotBytes
		s := hwoffload.Slot(mem[off : off+hwoffload.SlotBytes])
		s.Clear()
		s.PutHeader(kind, flow, seq, 0, 0)
		seq++
		return s
	}
	publish := func() {
		prod3++
		r.Store32(hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingProd), prod3)
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		for p := r.Load32(hwoffload.RegCmdProd); cons != p; {
			off := cmdBase + int(cons%(1<<hwoffload.CmdLog2Slots))*hwoffload.CmdSlotBytes
			c := hwoffload.CmdSlot(mem[off : off+hwoffload.CmdSlotBytes]).Get()
			cons++
			r.Store32(hwoffload.RegCmdCons, cons)
			var n uint32
			switch c.Op {
			case hwoffload.OpOpen:
				r.Store32(hwoffload.SessReg(int(c.Session), hwoffload.SessState), hwoffload.SessEstablished)
			case hwoffload.OpSend:
				sid := int(c.Session)
				rx := sessBase + sid*2*hwoffload.SessBufBytes
				tx := rx + hwoffload.SessBufBytes
				txCons := r.Load32(hwoffload.SessReg(sid, hwoffload.SessTxCons))
				rxProd := r.Load32(hwoffload.SessReg(sid, hwoffload.SessRxProd))
				for i := range c.Length {
					mem[rx+int((rxProd+i)%hwoffload.SessBufBytes)] = mem[tx+int((txCons+i)%hwoffload.SessBufBytes)]
				}
				r.Store32(hwoffload.SessReg(sid, hwoffload.SessTxCons), txCons+c.Length)
				r.Store32(hwoffload.SessReg(sid, hwoffload.SessRxProd), rxProd+c.Length)
				post(hwoffload.KindRecv, uint32(c.Session)).PutRecv(rxProd+c.Length, c.Length)
				publish()
				n = c.Length
			case hwoffload.OpUDPSend:
				pos := udpProd
				if pos%hwoffload.UDPAreaBytes+c.Length > hwoffload.UDPAreaBytes {
					pos += hwoffload.UDPAreaBytes - pos%hwoffload.UDPAreaBytes
				}
				copy(mem[rxBase+int(pos%hwoffload.UDPAreaBytes):], mem[txBase+int(c.Offset):txBase+int(c.Offset+c.Length)])
				udpProd = pos + c.Length
				r.Store32(hwoffload.RegUDPRxProd, udpProd)
				post(hwoffload.KindUDPRecv, ^uint32(0)).PutUDPRecv(c.Port, c.DstPort, c.IP, pos, c.Length)
				publish()
				n = c.Length
			}
			post(hwoffload.KindCompletion, uint32(c.Session)).PutCompletion(c.Tag, c.Op, hwoffload.StatusOK, c.Port, n)
			publish()
		}
		runtime.Gosched()
	}
}

// TestHostPathAllocs: the host path's steady state allocates nothing:
// Conn.Write and Read (SEND issued, RECV waited for), PacketConn.WriteTo
// (its completion waited for) and ReadFrom, and their netip forms, against
// an engine that echoes.
func TestHostPathAllocs(t *testing.T) {
	r := hwoffload.FakeHostRegion(8)
	defer r.Close()
	stop, done := make(chan struct{}), make(chan struct{})
	go echoEngine(r, stop, done)
	defer func() { close(stop); <-done }()
	m, err := r.Map()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hwoffload.OpenRegion(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dev.Dial(ctx, netip.MustParseAddrPort("10.0.0.1:9000"))
	if err != nil {
		t.Fatal(err)
	}
	msg, buf := make([]byte, 64), make([]byte, 2048)
	for i := range msg {
		msg[i] = byte(i)
	}
	tcp := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	}
	pc, err := dev.ListenUDP(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	to := netip.MustParseAddrPort("10.0.0.1:7")
	ua := net.UDPAddrFromAddrPort(to)
	udp := func() {
		if _, err := pc.WriteTo(msg, ua); err != nil {
			t.Fatal(err)
		}
		if n, from, err := pc.ReadFrom(buf); err != nil || n != len(msg) || from.(*net.UDPAddr).AddrPort() != to {
			t.Fatalf("ReadFrom: %d bytes from %v, %v", n, from, err)
		}
	}
	udpAddrPort := func() {
		if _, err := pc.WriteToUDPAddrPort(msg, to); err != nil {
			t.Fatal(err)
		}
		if n, from, err := pc.ReadFromUDPAddrPort(buf); err != nil || n != len(msg) || from != to {
			t.Fatalf("ReadFromUDPAddrPort: %d bytes from %v, %v", n, from, err)
		}
	}
	for _, f := range []struct {
		name string
		f    func()
	}{{"Conn Write+Read", tcp}, {"PacketConn WriteTo+ReadFrom", udp}, {"PacketConn netip", udpAddrPort}} {
		for range 100 { // warm up: waiters, buffers, timers
			f.f()
		}
		if a := testing.AllocsPerRun(500, f.f); a != 0 {
			t.Errorf("%s: %v allocations per round trip, want 0", f.name, a)
		}
	}
}
