//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/afpacket"
	"github.com/tickwire/tickwire/link/afxdp"
	"github.com/tickwire/tickwire/link/frame"
)

var (
	xdpPeer  = netip.MustParsePrefix("10.205.0.1/24") // the kernel client
	xdpStack = netip.MustParsePrefix("10.205.0.2/24") // tickwire on AF_XDP
)

// setupXDPRTT is the setup of xdp_tcp_rtt_64B_latency:
//   - tickwire: a kernel TCP client in one namespace, a veth pair to a
//     second namespace, tickwire on the far end over AF_XDP (link/afxdp,
//     in this process), in latency mode, echoing from a ServeTCP handler
//     on the endpoint's reader goroutine;
//   - baseline: kernel to kernel over veth, as for tap_tcp_rtt_64B.
func setupXDPRTT(p params) (*pair, error) {
	switch {
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%w: needs root to create namespaces, a veth pair and AF_XDP sockets", errSkip)
	case runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64":
		return nil, fmt.Errorf("%w: AF_XDP needs linux/amd64 or linux/arm64", errSkip)
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: needs %s", errSkip, tool)
		}
	}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (*pair, error) { cleanup(); return nil, err }

	ownNS, remove, err := newNetns()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, remove)
	peerNS, remove, err := newNetns()
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, remove)
	own, peer := kerneltest.Name(netPrefix+"x"), kerneltest.Name(netPrefix+"y")
	for _, step := range []struct {
		ns   *kerneltest.Netns
		args []string
	}{
		{ownNS, []string{"ip", "link", "add", own, "type", "veth", "peer", "name", peer, "netns", peerNS.Name}},
		{ownNS, []string{"ip", "link", "set", own, "up"}},
		{peerNS, []string{"ip", "addr", "add", xdpPeer.String(), "dev", peer}},
		{peerNS, []string{"ip", "link", "set", peer, "up"}},
		// Wire frames only: no partial checksums or GSO from the kernel.
		{peerNS, []string{"ethtool", "-K", peer, "tx", "off", "tso", "off", "gso", "off"}},
	} {
		if _, err := step.ns.Run(step.args[0], step.args[1:]...); err != nil {
			return fail(err)
		}
	}
	var s *tickwire.Stack
	if err := ownNS.Do(func() error {
		ep, err := afxdp.New(own, afxdp.Config{Addr: xdpStack.Addr()})
		if err != nil {
			return err
		}
		if s, err = tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: xdpStack, Latency: true}); err != nil {
			ep.Close()
			return err
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { s.Close() })
	ln, err := s.ServeTCP(echoPort, echoHandler)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { ln.Close() })
	var kc net.Conn
	if err := peerNS.Do(func() (err error) {
		kc, err = net.DialTimeout("tcp", netip.AddrPortFrom(xdpStack.Addr(), echoPort).String(), stallTimeout)
		return err
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { kc.Close() })

	vconn, closeBaseline, err := vethBaseline()
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, closeBaseline)
	return &pair{
		tickwire: func() (sample, error) { return tcpPingPong(kc, p) },
		baseline: func() (sample, error) { return tcpPingPong(vconn, p) },
		close:    cleanup,
	}, nil
}

// setupXDPCapture is the setup of xdp_capture_latency: for each side, a
// veth pair in a namespace of its own, an AF_PACKET socket writing one
// frame at a time into one end, and a feed.Decoder (mirror + fast/sse)
// reading the other end through afxdp.Source (tickwire) or afpacket.Source
// (baseline). A sample times each frame from just before its sendto to
// the decoder's Trade callback.
func setupXDPCapture(p params) (*pair, error) {
	switch {
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%w: needs root to create namespaces, a veth pair and AF_XDP sockets", errSkip)
	case runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64":
		return nil, fmt.Errorf("%w: AF_XDP needs linux/amd64 or linux/arm64", errSkip)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: needs iproute2 (ip)", errSkip)
	}
	payloads, err := tradePayloads()
	if err != nil {
		return nil, err
	}
	xdpSide, closeXDP, err := captureSide(p, payloads, true)
	if err != nil {
		return nil, err
	}
	pktSide, closePkt, err := captureSide(p, payloads, false)
	if err != nil {
		closeXDP()
		return nil, err
	}
	return &pair{tickwire: xdpSide, baseline: pktSide, close: func() { closePkt(); closeXDP() }}, nil
}

// tradeNotifier is the feed.Handler of xdp_capture_latency: it sends the
// time of each trade, dropping it when the last one was not taken.
type tradeNotifier struct {
	feed.HandlerFuncs
	at chan time.Time
}

func (n *tradeNotifier) Trade(*sse.Trade, feed.Meta) {
	select {
	case n.at <- time.Now():
	default:
	}
}

// captureSide builds one side of xdp_capture_latency.
func captureSide(p params, payloads [][]byte, useXDP bool) (func() (sample, error), func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (func() (sample, error), func(), error) { cleanup(); return nil, nil, err }
	ns, remove, err := newNetns()
	if err != nil {
		return nil, nil, err
	}
	cleanups = append(cleanups, remove)
	capDev, sendDev := kerneltest.Name(netPrefix+"c"), kerneltest.Name(netPrefix+"s")
	for _, args := range [][]string{
		{"ip", "link", "add", capDev, "type", "veth", "peer", "name", sendDev},
		{"ip", "link", "set", capDev, "up"},
		{"ip", "link", "set", sendDev, "up"},
	} {
		if _, err := ns.Run(args[0], args[1:]...); err != nil {
			return fail(err)
		}
	}
	var src frame.Source
	var sock int
	var sa unix.SockaddrLinklayer
	if err := ns.Do(func() error {
		var err error
		if useXDP {
			src, err = afxdp.NewSource(capDev, afxdp.Config{Filter: afxdp.Filter{Port: 9129}})
		} else {
			src, err = afpacket.New(capDev, afpacket.Config{})
		}
		if err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(sendDev)
		if err != nil {
			src.Close()
			return err
		}
		sa.Ifindex = ifi.Index
		if sock, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			src.Close()
		}
		return err
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { unix.Close(sock) })
	n := &tradeNotifier{at: make(chan time.Time, 1)}
	d, err := feed.New(feed.Config{}, n)
	if err != nil {
		src.Close()
		return fail(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(context.Background(), src) // ends with io.EOF when src closes
	}()
	cleanups = append(cleanups, func() { src.Close(); <-done; d.Close() })
	flow, err := buildFlow(payloads, nil)
	if err != nil {
		return fail(err)
	}
	if err := unix.Sendto(sock, flow.syn, 0, &sa); err != nil {
		return fail(err)
	}
	sampler := func() (sample, error) {
		s := sample{lat: make([]time.Duration, 0, min(maxLatencySamples, max(1024, int(p.dur/time.Microsecond))))}
		m0 := mallocs()
		_, _, err := flow.passes(p.dur, func(fr []byte, _ int64) error {
			if len(s.lat) == cap(s.lat) {
				return errFull
			}
			t0 := time.Now()
			if err := unix.Sendto(sock, fr, 0, &sa); err != nil {
				return err
			}
			select {
			case t := <-n.at:
				s.lat = append(s.lat, t.Sub(t0))
				return nil
			case <-time.After(stallTimeout):
				return errors.New("no trade decoded from a frame sent")
			}
		})
		s.allocs = mallocs() - m0
		s.ops = int64(len(s.lat))
		if errors.Is(err, errFull) {
			err = nil
		}
		return s, err
	}
	return sampler, cleanup, nil
}

// setupXDPRxRate is the setup of xdp_rx_mpps: per side a veth pair in a
// namespace of its own, hping3 flooding one end with 64-byte UDP frames
// (to a permanent neighbour entry: no ARP) while the side's source drains
// the other end; a sample is the frames the source returned per second of
// the flood. The flood runs only during a side's sample.
func setupXDPRxRate(p params) (*pair, error) {
	switch {
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%w: needs root to create namespaces, a veth pair and AF_XDP sockets", errSkip)
	case runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64":
		return nil, fmt.Errorf("%w: AF_XDP needs linux/amd64 or linux/arm64", errSkip)
	}
	for _, tool := range []string{"ip", "hping3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: needs %s", errSkip, tool)
		}
	}
	xdpSide, closeXDP, err := rxRateSide(p, true)
	if err != nil {
		return nil, err
	}
	pktSide, closePkt, err := rxRateSide(p, false)
	if err != nil {
		closeXDP()
		return nil, err
	}
	return &pair{tickwire: xdpSide, baseline: pktSide, close: func() { closePkt(); closeXDP() }}, nil
}

var (
	floodFrom = netip.MustParsePrefix("10.206.0.1/24")
	floodTo   = netip.MustParseAddr("10.206.0.2")
)

// rxRateSide builds one side of xdp_rx_mpps.
func rxRateSide(p params, useXDP bool) (func() (sample, error), func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (func() (sample, error), func(), error) { cleanup(); return nil, nil, err }
	ns, remove, err := newNetns()
	if err != nil {
		return nil, nil, err
	}
	cleanups = append(cleanups, remove)
	capDev, sendDev := kerneltest.Name(netPrefix+"r"), kerneltest.Name(netPrefix+"f")
	for _, args := range [][]string{
		{"ip", "link", "add", capDev, "type", "veth", "peer", "name", sendDev},
		{"ip", "link", "set", capDev, "up"},
		{"ip", "link", "set", sendDev, "up"},
		{"ip", "addr", "add", floodFrom.String(), "dev", sendDev},
	} {
		if _, err := ns.Run(args[0], args[1:]...); err != nil {
			return fail(err)
		}
	}
	var src frame.Source
	var frames func() uint64
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(capDev)
		if err != nil {
			return err
		}
		if _, err := ns.Run("ip", "neigh", "add", floodTo.String(), "lladdr", ifi.HardwareAddr.String(), "dev", sendDev, "nud", "permanent"); err != nil {
			return err
		}
		if useXDP {
			s, err := afxdp.NewSource(capDev, afxdp.Config{Filter: afxdp.Filter{Port: 9129}})
			if err != nil {
				return err
			}
			src, frames = s, func() uint64 { return s.Stats().RxFrames }
		} else {
			s, err := afpacket.New(capDev, afpacket.Config{})
			if err != nil {
				return err
			}
			src, frames = s, func() uint64 { return s.Stats().Frames }
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		batch := frame.NewBatch(64, 2048)
		for {
			if _, err := src.ReadFrames(batch); err != nil {
				return // io.EOF at Close
			}
		}
	}()
	cleanups = append(cleanups, func() { src.Close(); <-done })
	sampler := func() (sample, error) {
		// 8 UDP + 22 payload + 20 IPv4 + 14 Ethernet = 64 bytes.
		flood := ns.Command(context.Background(), "hping3", "--flood", "-q", "-2", "-p", "9129", "-s", "40000", "-k", "-d", "22", floodTo.String())
		if err := flood.Start(); err != nil {
			return sample{}, err
		}
		defer func() { flood.Process.Kill(); flood.Wait() }()
		// Let the flood reach its rate before timing.
		warm := time.Now().Add(stallTimeout)
		for start := frames(); frames()-start < 10000; {
			if time.Now().After(warm) {
				return sample{}, errors.New("hping3 flood delivered no frames")
			}
			time.Sleep(time.Millisecond)
		}
		n0, t0 := frames(), time.Now()
		time.Sleep(p.dur)
		n1, t1 := frames(), time.Now()
		return sample{value: float64(n1-n0) / t1.Sub(t0).Seconds(), ops: int64(n1 - n0)}, nil
	}
	return sampler, cleanup, nil
}
