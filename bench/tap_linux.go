//go:build linux

package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/tap"
)

// Every device and namespace the bench creates starts with this prefix.
const netPrefix = "twb"

var (
	tapHost    = netip.MustParsePrefix("10.203.0.1/24") // kernel side of the TAP device
	tapStack   = netip.MustParsePrefix("10.203.0.2/24") // tickwire on the TAP device
	vethServer = netip.MustParsePrefix("10.204.0.1/24")
	vethClient = netip.MustParsePrefix("10.204.0.2/24")
)

// created lists the namespaces this process made and has not deleted yet,
// for cleanupStale.
var created struct {
	mu sync.Mutex
	// +checklocks:mu
	names map[string]bool
}

// newNetns creates a namespace named netPrefix-<random> with loopback up
// and IPv6 off (no router solicitations or DAD traffic during the
// measurement); remove deletes it with every device inside.
func newNetns() (ns *kerneltest.Netns, remove func(), err error) {
	ns = &kerneltest.Netns{Name: kerneltest.Name(netPrefix + "-")}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("ip netns add %s: %v: %s", ns.Name, err, out)
	}
	created.mu.Lock()
	if created.names == nil {
		created.names = map[string]bool{}
	}
	created.names[ns.Name] = true
	created.mu.Unlock()
	remove = func() {
		exec.Command("ip", "netns", "delete", ns.Name).Run()
		created.mu.Lock()
		delete(created.names, ns.Name)
		created.mu.Unlock()
	}
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"},
		{"sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"},
	} {
		if _, err := ns.Run(args[0], args[1:]...); err != nil {
			remove()
			return nil, nil, err
		}
	}
	return ns, remove, nil
}

// cleanupStale deletes the namespaces this process created, with the
// devices inside, when an interruption skips the measures' own cleanup.
// Other processes' namespaces are left alone, even with the same prefix.
func cleanupStale() {
	created.mu.Lock()
	defer created.mu.Unlock()
	for name := range created.names {
		exec.Command("ip", "netns", "delete", name).Run()
	}
}

// setupTapRTT returns the setup of tap_tcp_rtt_64B, or with latency set of
// tap_tcp_rtt_64B_latency, which builds both sides:
//   - tickwire: a kernel TCP client in a namespace, a TAP device in that
//     namespace, tickwire on the device (in this process) echoing: from a
//     goroutine per connection on net.Conn, or in latency mode from a
//     ServeTCP handler;
//   - baseline: a kernel TCP client in one namespace, a kernel echo server
//     in another, a veth pair between them.
func setupTapRTT(latency bool) func(params) (*pair, error) {
	return func(p params) (*pair, error) { return setupTapRTTMode(p, latency) }
}

func setupTapRTTMode(p params, latency bool) (*pair, error) {
	if err := tapCheck(); err != nil {
		return nil, err
	}
	var cleanups []func()
	cleanup := func() { undo(cleanups) }
	fail := func(err error) (*pair, error) { cleanup(); return nil, err }

	kc, err := tapEchoSide(latency, false, &cleanups)
	if err != nil {
		return fail(err)
	}

	// Baseline: kernel to kernel over veth.
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

// vethPair builds two namespaces joined by a veth pair (MTU 1500, the
// kernel's offloads as it sets them), vethServer's address in the server's,
// vethClient's in clientNS, and a kernel TCP listener on port at
// vethServer; cleanup closes the listener and removes both.
func vethPair(port uint16) (kln net.Listener, clientNS *kerneltest.Netns, cleanup func(), err error) {
	var cleanups []func()
	cleanup = func() { undo(cleanups) }
	fail := func(err error) (net.Listener, *kerneltest.Netns, func(), error) {
		cleanup()
		return nil, nil, nil, err
	}
	serverNS, remove, err := newNetns()
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, remove)
	clientNS, remove, err = newNetns()
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, remove)
	vs, vc := kerneltest.Name(netPrefix+"v"), kerneltest.Name(netPrefix+"w")
	for _, step := range []struct {
		ns   *kerneltest.Netns
		args []string
	}{
		{serverNS, []string{"ip", "link", "add", vs, "type", "veth", "peer", "name", vc, "netns", clientNS.Name}},
		{serverNS, []string{"ip", "addr", "add", vethServer.String(), "dev", vs}},
		{serverNS, []string{"ip", "link", "set", vs, "up"}},
		{clientNS, []string{"ip", "addr", "add", vethClient.String(), "dev", vc}},
		{clientNS, []string{"ip", "link", "set", vc, "up"}},
	} {
		if _, err := step.ns.Run(step.args[0], step.args[1:]...); err != nil {
			return fail(err)
		}
	}
	if err := serverNS.Do(func() (err error) {
		kln, err = net.Listen("tcp", netip.AddrPortFrom(vethServer.Addr(), port).String())
		return err
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { kln.Close() })
	return kln, clientNS, cleanup, nil
}

// vethBaseline builds the kernel-to-kernel baseline of the RTT measures:
// a kernel echo server in one namespace, a kernel client in another, a
// veth pair between them. It returns the client's connection.
func vethBaseline() (net.Conn, func(), error) {
	var cleanups []func()
	cleanup := func() { undo(cleanups) }
	fail := func(err error) (net.Conn, func(), error) { cleanup(); return nil, nil, err }
	kln, clientNS, removeVeth, err := vethPair(echoPort)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, removeVeth)
	ksrv := serveTCP(kln, echo)
	cleanups = append(cleanups, ksrv.stop)
	var vconn net.Conn
	if err := clientNS.Do(func() (err error) {
		vconn, err = net.DialTimeout("tcp", kln.Addr().String(), stallTimeout)
		return err
	}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { vconn.Close() })
	return vconn, cleanup, nil
}

// undo runs the cleanups of a setup's steps, the last step's first.
func undo(cleanups []func()) {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

// tapCheck returns errSkip (wrapped) when the TAP measures cannot run.
func tapCheck() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root to create namespaces, a TAP device and a veth pair", errSkip)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: needs iproute2 (ip)", errSkip)
	}
	return nil
}

// tapEchoSide builds tickwire's side of the TAP measures: a namespace, a
// TAP device in it, tickwire on the device (in this process, with
// Config.LockOSThread set to lock) echoing on echoPort, from a goroutine
// per connection on net.Conn or, in latency mode, from a ServeTCP handler;
// and a kernel TCP client in the namespace, connected. It appends what
// undoes each step to cleanups.
func tapEchoSide(latency, lock bool, cleanups *[]func()) (net.Conn, error) {
	tapNS, s, err := tapStackSide(latency, lock, cleanups)
	if err != nil {
		return nil, err
	}
	if latency {
		ln, err := s.ServeTCP(echoPort, echoHandler)
		if err != nil {
			return nil, err
		}
		*cleanups = append(*cleanups, func() { ln.Close() })
	} else {
		ln, err := s.ListenTCP(echoPort)
		if err != nil {
			return nil, err
		}
		srv := serveTCP(ln, echo)
		*cleanups = append(*cleanups, srv.stop)
	}
	var kc net.Conn
	if err := tapNS.Do(func() (err error) {
		kc, err = net.DialTimeout("tcp", netip.AddrPortFrom(tapStack.Addr(), echoPort).String(), stallTimeout)
		return err
	}); err != nil {
		return nil, err
	}
	*cleanups = append(*cleanups, func() { kc.Close() })
	return kc, nil
}

// tapStackSide builds a namespace with a TAP device in it and tickwire on
// the device (in this process; Config.Latency and Config.LockOSThread as
// given). It appends what undoes each step to cleanups.
func tapStackSide(latency, lock bool, cleanups *[]func()) (*kerneltest.Netns, *tickwire.Stack, error) {
	tapNS, remove, err := newNetns()
	if err != nil {
		return nil, nil, err
	}
	*cleanups = append(*cleanups, remove)
	var s *tickwire.Stack
	err = tapNS.Do(func() error {
		ep, err := tap.New(tap.Config{Name: kerneltest.Name(netPrefix + "t"), Host: tapHost})
		if err != nil {
			return err
		}
		if s, err = tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: tapStack, Latency: latency, LockOSThread: lock}); err != nil {
			ep.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	*cleanups = append(*cleanups, func() { s.Close() })
	return tapNS, s, nil
}

// setupTapRTTLocked builds tap_tcp_rtt_64B_latency_locked: two
// tap_tcp_rtt_64B_latency setups, each in its own namespace, the measured
// one with Config.LockOSThread.
func setupTapRTTLocked(p params) (*pair, error) {
	if err := tapCheck(); err != nil {
		return nil, err
	}
	var cleanups []func()
	cleanup := func() { undo(cleanups) }
	locked, err := tapEchoSide(true, true, &cleanups)
	if err != nil {
		cleanup()
		return nil, err
	}
	unlocked, err := tapEchoSide(true, false, &cleanups)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) { return tcpPingPong(locked, p) },
		baseline: func() (sample, error) { return tcpPingPong(unlocked, p) },
		close:    cleanup,
	}, nil
}

// nsDial dials addr with a socket of namespace ns.
func nsDial(ns *kerneltest.Netns, addr string) dialer {
	return func() (c net.Conn, err error) {
		err = ns.Do(func() (err error) {
			c, err = net.DialTimeout("tcp", addr, stallTimeout)
			return err
		})
		return c, err
	}
}

// setupBulkVeth builds tcp_bulk_veth: tcp_bulk's stream from a kernel
// client in a namespace to tickwire (default Config) on a TAP device in
// that namespace, against the same stream from a kernel client to a kernel
// server in two namespaces joined by a veth pair (MTU 1500).
func setupBulkVeth(p params) (*pair, error) {
	if err := tapCheck(); err != nil {
		return nil, err
	}
	var cleanups []func()
	cleanup := func() { undo(cleanups) }
	fail := func(err error) (*pair, error) { cleanup(); return nil, err }

	tapNS, s, err := tapStackSide(false, false, &cleanups)
	if err != nil {
		return fail(err)
	}
	ln, err := s.ListenTCP(9)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { ln.Close() })

	kln, clientNS, removeVeth, err := vethPair(9)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, removeVeth)

	twDial := nsDial(tapNS, netip.AddrPortFrom(tapStack.Addr(), 9).String())
	kDial := nsDial(clientNS, kln.Addr().String())
	return &pair{
		tickwire: func() (sample, error) { return bulkRound(ln, twDial, p) },
		baseline: func() (sample, error) { return bulkRound(kln, kDial, p) },
		close:    cleanup,
	}, nil
}
