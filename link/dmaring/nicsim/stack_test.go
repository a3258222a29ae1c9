package nicsim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/netip"
	"testing"
	"time"

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
