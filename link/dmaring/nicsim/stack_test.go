package nicsim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/pipe"
)

// side is one stack on a dmaring endpoint served by a device.
type side struct {
	ep  *dmaring.Endpoint
	dev *nicsim.Device
	s   *tickwire.Stack
}

// newSide builds endpoint, device (on wire) and stack at addr; cleanup
// closes them in order.
func newSide(t testing.TB, cfg dmaring.Config, wire nicsim.Wire, addr string) *side {
	t.Helper()
	ep, err := dmaring.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: wire})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.MustParsePrefix(addr)})
	if err != nil {
		dev.Close()
		ep.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		dev.Close()
	})
	return &side{ep: ep, dev: dev, s: s}
}

// newStacks joins two stacks: stack, rings, device, pipe, device, rings,
// stack.
func newStacks(t testing.TB, cfg dmaring.Config) (a, b *side) {
	pa, pb := pipe.New(pipe.Options{})
	a = newSide(t, cfg, nicsim.NewPipeWire(pa), "10.0.0.1/24")
	b = newSide(t, cfg, nicsim.NewPipeWire(pb), "10.0.0.2/24")
	return a, b
}

func TestTCPBothWaysByteExact(t *testing.T) {
	for _, cfg := range []struct {
		name string
		cfg  dmaring.Config
	}{
		{"memfd", dmaring.Config{}},
		{"inmemory-2q", dmaring.Config{InMemory: true, Queues: 2, RingLog: 7}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			a, b := newStacks(t, cfg.cfg)
			size := 10 << 20
			if testing.Short() || raceEnabled {
				size = 2 << 20 // the race detector slows the stacks tenfold
			}
			ln, err := b.s.ListenTCP(7)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				io.Copy(c, c)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			c, err := a.s.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:7"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(120 * time.Second))
			want := make([]byte, size)
			rand.Read(want)
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(want)
				werr <- err
			}()
			got := make([]byte, size)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read back: %v (device A %+v, endpoint A %+v)", err, a.dev.Stats(), a.ep.Stats())
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("echoed bytes differ")
			}
			for _, sd := range []*side{a, b} {
				st, ds := sd.ep.Stats(), sd.dev.Stats()
				if st.RxBadTCPChecksum != 0 || st.RxBadCompletions != 0 || st.RxDeviceErrors != 0 || ds.Errors != 0 {
					t.Errorf("errors: endpoint %+v device %+v", st, ds)
				}
				if st.TxFrames == 0 || st.RxFrames == 0 {
					t.Errorf("no traffic counted: %+v", st)
				}
				if err := sd.ep.Err(); err != nil {
					t.Error(err)
				}
			}
			t.Logf("A endpoint %+v", a.ep.Stats())
			t.Logf("A device %+v", a.dev.Stats())
		})
	}
}

// udpFrame builds an Ethernet/IPv4/UDP frame with correct checksums.
func udpFrame(dst net.HardwareAddr, src, to netip.AddrPort, payload []byte) []byte {
	const hl = header.EthernetMinimumSize + header.IPv4MinimumSize + header.UDPMinimumSize
	f := make([]byte, hl+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress([]byte{2, 0, 0, 0, 0, 9}), DstAddr: tcpip.LinkAddress(dst), Type: header.IPv4ProtocolNumber,
	})
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(header.IPv4MinimumSize + header.UDPMinimumSize + len(payload)), TTL: 64,
		Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr:  tcpip.AddrFrom4(src.Addr().As4()), DstAddr: tcpip.AddrFrom4(to.Addr().As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	u := header.UDP(ip[header.IPv4MinimumSize:])
	u.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: to.Port(), Length: uint16(header.UDPMinimumSize + len(payload))})
	copy(u.Payload(), payload)
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), u.Length())
	u.SetChecksum(^u.CalculateChecksum(checksum.Checksum(payload, xsum)))
	return f
}

// TestStackReceivesOnEveryQueue: the stack's RX goroutine of each queue
// delivers what the device puts on that queue, and a frame with a wrong
// UDP checksum is dropped by the endpoint and counted in the stack's
// Stats.
func TestStackReceivesOnEveryQueue(t *testing.T) {
	sd := newSide(t, dmaring.Config{Queues: 3, RingLog: 5}, &captureWire{}, "10.0.0.1/24")
	var got atomic.Int64
	srv, err := sd.s.ServeUDP(9000, func(*tickwire.UDPConn, []byte, netip.AddrPort) { got.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	from, to := netip.MustParseAddrPort("10.0.0.9:5000"), netip.MustParseAddrPort("10.0.0.1:9000")
	for q := range 3 {
		for i := range 10 {
			if err := sd.dev.ReceiveOn(q, udpFrame(sd.ep.MAC(), from, to, []byte{byte(q), byte(i)}), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "30 datagrams", func() bool { return got.Load() == 30 })
	bad := udpFrame(sd.ep.MAC(), from, to, []byte("bad"))
	bad[len(bad)-1] ^= 1
	sd.dev.ReceiveOn(2, bad, 0)
	waitFor(t, "the bad checksum counted", func() bool { return sd.s.Stats().DropUDPChecksum == 1 })
	if got.Load() != 30 {
		t.Fatalf("%d datagrams delivered, want 30", got.Load())
	}
}

// TestTxStampsOfStackSegments: with Config.TxStamps, the segments a stack
// sends on a TCP connection come back from TxStamps with the connection's
// addresses and ports, and the order written on it is found by its bytes:
// a stamp whose payload holds it, at a sequence number one past the
// handshake's (the first data byte).
func TestTxStampsOfStackSegments(t *testing.T) {
	a, b := newStacks(t, dmaring.Config{InMemory: true, Queues: 2, RingLog: 6, TxStamps: true})
	ln, err := b.s.ListenTCP(9000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := a.s.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:9000"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	order := []byte("BUY 100 XYZ @ 12.34")
	if _, err := c.Write(order); err != nil {
		t.Fatal(err)
	}
	stamps := make([]dmaring.TxStamp, 16)
	var syn, data *dmaring.TxStamp
	for deadline := time.Now().Add(30 * time.Second); data == nil; {
		n := a.ep.TxStamps(stamps)
		for i := range stamps[:n] {
			s := &stamps[i]
			if s.Proto != 6 || s.Src != local || s.Dst != netip.MustParseAddrPort("10.0.0.2:9000") {
				continue
			}
			if syn == nil {
				cp := *s
				syn = &cp // the SYN: the first segment of the connection
			} else if s.Payload == len(order) {
				cp := *s
				data = &cp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stamp of the order's segment (SYN %+v)", syn)
		}
		time.Sleep(time.Millisecond)
	}
	if data.Seq != syn.Seq+1 {
		t.Errorf("order at seq %d, want the SYN's %d + 1", data.Seq, syn.Seq)
	}
	if data.Time < syn.Time || time.Since(time.Unix(0, data.Time)) > time.Minute {
		t.Errorf("order stamped %d, SYN %d", data.Time, syn.Time)
	}
}
