//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/tap"
)

var (
	mcastGroup = netip.MustParseAddrPort("239.203.0.1:5000")
	mcastTap   = netip.MustParsePrefix("10.205.0.1/24") // kernel side of the TAP device
	mcastStack = netip.MustParsePrefix("10.205.0.2/24")
	mcastVethS = netip.MustParsePrefix("10.206.0.1/24") // kernel sender, baseline
	mcastVethR = netip.MustParsePrefix("10.206.0.2/24") // kernel receiver, baseline
)

// oneWay measures the one-way latency of datagrams: send writes one
// datagram carrying the nanoseconds since base, and the receiver sends the
// latency it computed on got. Datagrams go one at a time: the next is sent
// once the previous has arrived, so nothing queues.
func oneWay(p params, base time.Time, send func(b []byte) error, got <-chan time.Duration) (sample, error) {
	buf := make([]byte, 64)
	stall := time.NewTimer(stallTimeout)
	defer stall.Stop()
	op := func() (time.Duration, error) {
		binary.LittleEndian.PutUint64(buf, uint64(time.Since(base)))
		if err := send(buf); err != nil {
			return 0, err
		}
		stall.Reset(stallTimeout)
		select {
		case d := <-got:
			return d, nil
		case <-stall.C:
			return 0, errors.New("datagram lost")
		}
	}
	for range 200 {
		if _, err := op(); err != nil {
			return sample{}, err
		}
	}
	s := sample{lat: make([]time.Duration, 0, min(maxLatencySamples, max(1024, int(p.dur/time.Microsecond))))}
	m0 := mallocs()
	start := time.Now()
	for len(s.lat) < cap(s.lat) && time.Since(start) < p.dur {
		d, err := op()
		if err != nil {
			return s, err
		}
		s.lat = append(s.lat, d)
		s.ops++
	}
	s.allocs = mallocs() - m0
	s.value = float64(s.ops) / time.Since(start).Seconds()
	return s, nil
}

// sinceBase returns the latency of a datagram stamped by oneWay.
func sinceBase(base time.Time, payload []byte) (time.Duration, bool) {
	if len(payload) < 8 {
		return 0, false
	}
	return time.Since(base) - time.Duration(binary.LittleEndian.Uint64(payload)), true
}

// setupMcastRx builds udp_mcast_rx_latency:
//   - tickwire: a kernel UDP sender in a namespace, a TAP device in it
//     routing 224.0.0.0/4, tickwire on the device with a ServeUDP handler
//     joined to the group (the handler computes the latency);
//   - baseline: a kernel sender in one namespace, a kernel receiver joined
//     to the group in another (ListenMulticastUDP, a goroutine reading), a
//     veth pair between them.
func setupMcastRx(p params) (*pair, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root to create namespaces, a TAP device and a veth pair", errSkip)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: needs iproute2 (ip)", errSkip)
	}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (*pair, error) { cleanup(); return nil, err }
	base := time.Now()

	// tickwire side.
	tapNS, remove, err := newNetns()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, remove)
	dev := kerneltest.Name(netPrefix + "m")
	var s *tickwire.Stack
	if err := tapNS.Do(func() error {
		ep, err := tap.New(tap.Config{Name: dev, Host: mcastTap})
		if err != nil {
			return err
		}
		if s, err = tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: mcastStack}); err != nil {
			ep.Close()
			return err
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { s.Close() })
	twGot := make(chan time.Duration, 1)
	c, err := s.ServeUDP(mcastGroup.Port(), func(_ *tickwire.UDPConn, payload []byte, _ netip.AddrPort) {
		if d, ok := sinceBase(base, payload); ok {
			select {
			case twGot <- d:
			default:
			}
		}
	})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { c.Close() })
	if err := c.JoinGroup(mcastGroup.Addr()); err != nil {
		return fail(err)
	}
	if _, err := tapNS.Run("ip", "route", "add", "224.0.0.0/4", "dev", dev); err != nil {
		return fail(err)
	}
	var twSender *net.UDPConn
	if err := tapNS.Do(func() (err error) {
		twSender, err = net.ListenUDP("udp4", &net.UDPAddr{IP: mcastTap.Addr().AsSlice()})
		return err
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { twSender.Close() })

	// Baseline: kernel to kernel over veth.
	recvNS, remove, err := newNetns()
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, remove)
	sendNS, remove, err := newNetns()
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, remove)
	vr, vs := kerneltest.Name(netPrefix+"r"), kerneltest.Name(netPrefix+"s")
	for _, step := range []struct {
		ns   *kerneltest.Netns
		args []string
	}{
		{recvNS, []string{"ip", "link", "add", vr, "type", "veth", "peer", "name", vs, "netns", sendNS.Name}},
		{recvNS, []string{"ip", "addr", "add", mcastVethR.String(), "dev", vr}},
		{recvNS, []string{"ip", "link", "set", vr, "up"}},
		{sendNS, []string{"ip", "addr", "add", mcastVethS.String(), "dev", vs}},
		{sendNS, []string{"ip", "link", "set", vs, "up"}},
		{sendNS, []string{"ip", "route", "add", "224.0.0.0/4", "dev", vs}},
	} {
		if _, err := step.ns.Run(step.args[0], step.args[1:]...); err != nil {
			return fail(err)
		}
	}
	var krecv, ksend *net.UDPConn
	if err := recvNS.Do(func() error {
		ifi, err := net.InterfaceByName(vr)
		if err != nil {
			return err
		}
		krecv, err = net.ListenMulticastUDP("udp4", ifi, net.UDPAddrFromAddrPort(mcastGroup))
		return err
	}); err != nil {
		return fail(err)
	}
	kGot := make(chan time.Duration, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 64)
		for {
			n, err := krecv.Read(buf)
			if err != nil {
				return // closed
			}
			if d, ok := sinceBase(base, buf[:n]); ok {
				select {
				case kGot <- d:
				default:
				}
			}
		}
	}()
	cleanups = append(cleanups, func() { krecv.Close(); <-readerDone })
	if err := sendNS.Do(func() (err error) {
		ksend, err = net.ListenUDP("udp4", &net.UDPAddr{IP: mcastVethS.Addr().AsSlice()})
		return err
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { ksend.Close() })

	sendTo := func(c *net.UDPConn) func([]byte) error {
		return func(b []byte) error { _, err := c.WriteToUDPAddrPort(b, mcastGroup); return err }
	}
	return &pair{
		tickwire: func() (sample, error) { return oneWay(p, base, sendTo(twSender), twGot) },
		baseline: func() (sample, error) { return oneWay(p, base, sendTo(ksend), kGot) },
		close:    cleanup,
	}, nil
}
