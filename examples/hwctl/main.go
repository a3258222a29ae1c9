// Command hwctl inspects an offload engine's region, for people bringing up
// a card or a twin:
//
//	go run ./examples/hwctl -region /dev/shm/u50 regs       every register
//	go run ./examples/hwctl -region /dev/shm/u50 counters   counters and latency
//	go run ./examples/hwctl -region /dev/shm/u50 ring N     ring N's registers and unconsumed records
//	go run ./examples/hwctl -region /dev/shm/u50 sessions   the host path: command ring, open sessions, TCP ports listening
//	go run ./examples/hwctl -region /dev/shm/u50 udp        the host path's UDP: receive area and ports bound
//
// It maps the region and only reads it: it never writes CONS, so a host
// consuming the rings is not disturbed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/shm"
)

func main() {
	region := flag.String("region", "", "region file (a twin's /dev/shm/NAME)")
	limit := flag.Int("n", 16, "ring N: at most this many records printed")
	flag.Parse()
	if err := run(os.Stdout, *region, flag.Args(), *limit); err != nil {
		fmt.Fprintln(os.Stderr, "hwctl:", err)
		os.Exit(2)
	}
}

func run(w io.Writer, region string, args []string, max int) error {
	if region == "" || len(args) == 0 {
		return fmt.Errorf("usage: hwctl -region FILE regs|counters|ring N|sessions|udp")
	}
	r, err := shm.Open(region)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	dev, err := hwoffload.OpenRegion(ctx, r)
	if err != nil {
		r.Close()
		return err
	}
	defer dev.Close()
	switch args[0] {
	case "regs":
		for _, reg := range hwoffload.Registers {
			printReg(w, dev, reg.Name, reg.Offset, reg.Bits)
		}
		for k := range hwoffload.NumRings {
			for _, reg := range hwoffload.RingRegisters {
				printReg(w, dev, fmt.Sprintf("RING%d_%s", k, reg.Name), hwoffload.RingReg(k, reg.Offset), reg.Bits)
			}
		}
	case "counters":
		c, l := dev.Counters(), dev.Latency()
		fmt.Fprintf(w, "rx_frames %d\nrx_dropped %d\nmirror_bytes %d\nmirror_gap_bytes %d\ntrades %d\norders %d\nstep_seq_gaps %d\ndecode_errors %d\n",
			c.RxFrames, c.RxDropped, c.MirrorBytes, c.MirrorGapBytes, c.Trades, c.Orders, c.StepSeqGaps, c.DecodeErrors)
		fmt.Fprintf(w, "latency count %d min %v mean %v max %v\n", l.Count,
			hwoffload.CyclesDuration(l.Min), l.Mean(), hwoffload.CyclesDuration(l.Max))
	case "ring":
		if len(args) != 2 {
			return fmt.Errorf("usage: hwctl -region FILE ring N")
		}
		k, err := strconv.Atoi(args[1])
		if err != nil || k < 0 || k >= hwoffload.NumRings {
			return fmt.Errorf("ring %q: want 0 to %d", args[1], hwoffload.NumRings-1)
		}
		return printRing(w, dev, r, k, max)
	case "sessions":
		printSessions(w, dev)
	case "udp":
		printUDP(w, dev)
	default:
		return fmt.Errorf("unknown command %q: want regs, counters, ring N, sessions or udp", args[0])
	}
	return nil
}

func printReg(w io.Writer, dev *hwoffload.Device, name string, off, bits int) {
	if bits == 64 {
		v := dev.Read64(off)
		fmt.Fprintf(w, "0x%04X %-22s 0x%016x %d\n", off, name, v, v)
		return
	}
	v := dev.Read32(off)
	extra := ""
	if off == hwoffload.RegError {
		extra = " " + hwoffload.ErrorCode(v).String()
	}
	fmt.Fprintf(w, "0x%04X %-22s 0x%08x %d%s\n", off, name, v, v, extra)
}

// printRing prints ring k's registers and its unconsumed records, CONS to
// PROD, without consuming them.
func printRing(w io.Writer, dev *hwoffload.Device, r *shm.Region, k, max int) error {
	base := dev.Read64(hwoffload.RingReg(k, hwoffload.RingBase))
	log2 := dev.Read32(hwoffload.RingReg(k, hwoffload.RingLog2Slots))
	prod := dev.Read32(hwoffload.RingReg(k, hwoffload.RingProd))
	cons := dev.Read32(hwoffload.RingReg(k, hwoffload.RingCons))
	fmt.Fprintf(w, "ring %d: BASE %#x slots %d PROD %d CONS %d DROPPED %d\n", k, base, 1<<log2, prod, cons,
		dev.Read32(hwoffload.RingReg(k, hwoffload.RingDropped)))
	n := prod - cons
	if n > 1<<log2 {
		return fmt.Errorf("ring %d: PROD - CONS = %d is more than the ring holds", k, n)
	}
	var tr sse.Trade
	var o sse.Order
	for i := uint32(0); i < n && int(i) < max; i++ {
		off := int(base) + int((cons+i)&(1<<log2-1))*hwoffload.SlotBytes
		s := hwoffload.Slot(r.Bytes()[off : off+hwoffload.SlotBytes])
		fmt.Fprintf(w, "seq %d flow %d rx %d out %d: ", s.Seq(), s.Flow(), s.RxCycles(), s.OutCycles())
		switch s.Kind() {
		case hwoffload.KindTrade:
			s.Trade(&tr)
			fmt.Fprintln(w, tr.String())
		case hwoffload.KindOrder:
			s.Order(&o)
			fmt.Fprintln(w, o.String())
		case hwoffload.KindTCPGap:
			off, l := s.TCPGap()
			fmt.Fprintf(w, "tcp gap offset %d length %d\n", off, l)
		case hwoffload.KindSeqGap:
			c, e, g := s.SeqGap()
			fmt.Fprintf(w, "sequence gap category %d expected %d received %d\n", c, e, g)
		case hwoffload.KindDecodeError:
			off, code := s.DecodeError()
			fmt.Fprintf(w, "decode error offset %d code %q\n", int64(off), code)
		case hwoffload.KindFlowStart, hwoffload.KindFlowEnd:
			src, dst, sp, dp := s.FlowAddrs()
			what := "flow start"
			if s.Kind() == hwoffload.KindFlowEnd {
				what = fmt.Sprintf("flow end reason %d", s.EndReason())
			}
			fmt.Fprintf(w, "%s %s:%d->%s:%d\n", what, ip(src), sp, ip(dst), dp)
		default:
			fmt.Fprintf(w, "kind %d\n", s.Kind())
		}
	}
	return nil
}

func ip(v uint32) string { return fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&255, v>>8&255, v&255) }

// sessionStates names the STATE register's values.
var sessionStates = [...]string{"FREE", "OPENING", "ESTABLISHED", "PEER_CLOSED", "CLOSING"}

// printSessions prints the command ring's positions, every session that
// is not FREE (its ports, and the bytes buffered each way: received and
// not consumed by the host, handed over by SEND and not yet sent) and the
// TCP ports listening.
func printSessions(w io.Writer, dev *hwoffload.Device) {
	fmt.Fprintf(w, "commands: CMD_PROD %d CMD_CONS %d; HOST_REFUSED %d HOST_HELD %d\n", dev.Read32(hwoffload.RegCmdProd),
		dev.Read32(hwoffload.RegCmdCons), dev.Read64(hwoffload.RegHostRefused), dev.Read64(hwoffload.RegHostHeld))
	open := 0
	for s := range hwoffload.Sessions {
		reg := func(off int) uint32 { return dev.Read32(hwoffload.SessReg(s, off)) }
		st := reg(hwoffload.SessState)
		if st == hwoffload.SessFree {
			continue
		}
		open++
		name := fmt.Sprint(st)
		if int(st) < len(sessionStates) {
			name = sessionStates[st]
		}
		fmt.Fprintf(w, "session %d %s local :%d remote %s:%d rx_buffered %d tx_unsent %d\n", s, name,
			reg(hwoffload.SessLocalPort), ip(reg(hwoffload.SessRemoteIP)), reg(hwoffload.SessRemotePort),
			reg(hwoffload.SessRxProd)-reg(hwoffload.SessRxCons), reg(hwoffload.SessTxProd)-reg(hwoffload.SessTxCons))
	}
	fmt.Fprintf(w, "%d sessions open of %d\n", open, hwoffload.Sessions)
	fmt.Fprintf(w, "tcp listening:%s\n", ports(dev, hwoffload.RegListenPorts))
}

// printUDP prints the UDP receive area's positions and the ports bound.
func printUDP(w io.Writer, dev *hwoffload.Device) {
	prod, cons := dev.Read32(hwoffload.RegUDPRxProd), dev.Read32(hwoffload.RegUDPRxCons)
	fmt.Fprintf(w, "receive area: UDP_RX_PROD %d UDP_RX_CONS %d buffered %d UDP_RX_DROPPED %d\n", prod, cons, prod-cons,
		dev.Read64(hwoffload.RegUDPRxDropped))
	fmt.Fprintf(w, "udp bound:%s\n", ports(dev, hwoffload.RegUDPPorts))
}

// ports lists the ports whose bits are set in the bitmap at off.
func ports(dev *hwoffload.Device, off int) string {
	var b []byte
	for word := 0; word < hwoffload.PortBitmapSize/4; word++ {
		v := dev.Read32(off + word*4)
		for bit := 0; v != 0; bit, v = bit+1, v>>1 {
			if v&1 != 0 {
				b = fmt.Appendf(b, " %d", word*32+bit)
			}
		}
	}
	if b == nil {
		return " none"
	}
	return string(b)
}
