//go:build linux

package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/afxdp"
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
